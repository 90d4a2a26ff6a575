// The task list: one element per task, keyed by its id and updated in place (its head,
// its card, its buttons); its steer/continue box beside the body is left alone. And the
// thread view: #thread=REF shows that thread's tasks only, oldest first.

import { renderCard } from "./card.js";
import { endSteer, openCompose } from "./compose.js";
import { act, el, reconcile, when } from "./render.js";
import { isFinished, isLive, isRetryable, isTerminal, isWaiting } from "./statuses.js";
import { devices, tasks } from "./store.js";

const INTENT_LABELS = { computer_use: "computer use", thread_collaboration: "collaboration" };
const TITLE_CHARS = 200;

function taskNode(taskId) {
  return document.querySelector(`#tasks > li.task[data-task-id="${CSS.escape(taskId)}"]`);
}

function taskButton(cls, label, onClick) {
  return el("button", { type: "button", class: cls, on: { click: onClick } }, label);
}

// Its buttons; each finds the task's element and its current view when pressed.
function taskActions(view) {
  const taskId = view.taskId;
  const path = `/api/local/tasks/${encodeURIComponent(taskId)}`;
  const node = () => taskNode(taskId);
  const actions = [];
  if (isLive(view.status) && view.turnId && view.codexThreadRef) {
    actions.push(taskButton("steer", "Steer", () => openCompose(node(), "steer")));
  }
  if (isTerminal(view.status) && view.codexThreadRef) {
    actions.push(taskButton("continue", "Continue", () => openCompose(node(), "continue")));
  }
  if (view.codexThreadRef) {
    const ref = view.codexThreadRef;
    actions.push(taskButton("thread", "Thread", () => { location.hash = `thread=${encodeURIComponent(ref)}`; }));
  }
  if (!isFinished(view.status) && !view.cancelRequested) {
    actions.push(taskButton("cancel", "Cancel", () => act(node(), "POST", `${path}/cancel`)));
  }
  if (isRetryable(view.status)) actions.push(taskButton("retry", "Retry", () => act(node(), "POST", `${path}/retry`)));
  return actions;
}

function metaLine(view) {
  const card = view.executionProgress || {};
  const spec = view.task || {};
  return [view.taskId, INTENT_LABELS[spec.intentCategory], spec.targetCodexTurnId && "steer", `attempt ${view.attempt}`,
    view.deviceId && `on ${(devices.get(view.deviceId) || {}).deviceName || view.deviceId}`,
    card.backend || (view.result && view.result.backend), view.cancelRequested && "cancel requested",
    `created ${when(view.createdAt)}`].filter(Boolean).join(" · ");
}

// While a device runs it, the card's own status (waitingApproval…) says more than "running".
function shownStatus(view) {
  const card = view.executionProgress || {};
  return isLive(view.status) && card.status ? card.status : view.status;
}

function bodyParts(view) {
  const title = (view.title || "").slice(0, TITLE_CHARS);
  const shown = shownStatus(view);
  const actions = taskActions(view);
  return [
    { key: "head", make: () => el("div", { class: "task-head" },
      el("span", { class: "title", title }, title || view.taskId),
      el("span", { class: "status", data: { status: shown } }, shown)) },
    { key: "meta", make: () => el("div", { class: "meta" }, metaLine(view)) },
    view.waitReason && { key: "wait-reason", make: () => el("p", { class: "wait-reason", role: "status" }, view.waitReason) },
    { key: "card", make: () => el("div", { class: "card" }), update: (n) => renderCard(n, view) },
    actions.length && { key: "actions", make: () => el("div", { class: "task-actions" }, actions) },
  ].filter(Boolean);
}

function updateTask(node, view) {
  reconcile(node.querySelector(".task-body"), bodyParts(view));
  node.dataset.status = view.status;
  node.dataset.thread = view.codexThreadRef || "";
  node.toggleAttribute("data-waiting", isWaiting(shownStatus(view)));
  if (!isLive(view.status)) endSteer(node);
  showThreadOf(node);
}

function newTaskNode(view) {
  return el("li", { class: "task", data: { taskId: view.taskId, key: view.taskId } },
    el("div", { class: "task-body" }), el("div", { class: "compose" }));
}

function taskPart(view) {
  return { key: view.taskId, make: () => newTaskNode(view), update: (node) => updateTask(node, view) };
}

// One task changed: updated where it is, or, new, shown at the top.
export function renderTask(view) {
  let node = taskNode(view.taskId);
  if (!node) document.getElementById("tasks").prepend(node = newTaskNode(view));
  updateTask(node, view);
  document.getElementById("no-tasks").hidden = tasks.size > 0;
}

// A snapshot's tasks, in its order (newest first): the ones shown already are updated in place.
export function renderTasks(newestFirst) {
  reconcile(document.getElementById("tasks"), newestFirst.map(taskPart));
  document.getElementById("no-tasks").hidden = tasks.size > 0;
}

// ---- the thread view ----

function currentThread() {
  const match = /^#thread=(.+)$/.exec(location.hash);
  return match ? decodeURIComponent(match[1]) : null;
}

function showThreadOf(node) {
  const thread = currentThread();
  node.hidden = thread !== null && node.dataset.thread !== thread;
}

export function applyThreadView() {
  const thread = currentThread();
  const tasksList = document.getElementById("tasks");
  if (thread === null) delete tasksList.dataset.thread; else tasksList.dataset.thread = thread;
  tasksList.querySelectorAll(".task").forEach(showThreadOf);
  document.getElementById("thread-bar").hidden = thread === null;
  document.getElementById("thread-name").textContent = thread || "";
}
