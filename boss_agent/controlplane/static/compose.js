// Steer and continue: a message to a task's live turn, or a new turn on its thread. The
// box sits beside the task's body (tasks.js), so the live updates never touch it.

import { call } from "./api.js";
import { el } from "./render.js";
import { tasks } from "./store.js";

// Submit one task; ``status`` says how it went. The new task's id, or null on an error.
export async function postTask(body, status) {
  status.classList.remove("error");
  status.textContent = "sending…";
  try {
    const answer = await call("POST", "/api/local/tasks", body);
    status.textContent = `queued ${answer.taskId}`;
    return answer.taskId;
  } catch (err) {
    status.classList.add("error");
    status.textContent = err.message;
    return null;
  }
}

export function openCompose(node, mode) {
  const view = tasks.get(node.dataset.taskId);
  node.dataset.compose = mode;
  const status = el("p", { class: "compose-status", role: "status" });
  const form = el("form", { class: "compose-form", autocomplete: "off" },
    el("textarea", { name: "message", rows: 2, required: true, "aria-label": mode === "steer" ? "Steer message" : "Follow-up",
      placeholder: mode === "steer" ? "Tell Codex while it works…" : "Follow up on this thread…" }),
    el("div", { class: "row" },
      el("button", { type: "submit" }, mode === "steer" ? "Send to the running turn" : "Continue the thread"),
      el("button", { type: "button", on: { click: () => closeCompose(node) } }, "Close")),
    status);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const current = tasks.get(node.dataset.taskId) || view;
    const spec = current.task || {};
    const body = { prompt: form.elements.message.value, codexThreadRef: current.codexThreadRef,
      approvalMode: spec.approvalMode || "remote" };
    if (spec.workdir) body.workdir = spec.workdir;
    if (mode === "steer") body.targetCodexTurnId = current.turnId;
    const taskId = await postTask(body, status);
    if (taskId) { status.dataset.sentTaskId = taskId; form.elements.message.value = ""; }
  });
  node.querySelector(".compose").replaceChildren(form);
  form.elements.message.focus();
}

export function closeCompose(node) {
  delete node.dataset.compose;
  node.querySelector(".compose").replaceChildren();
}

// A steer needs the live turn: once it has ended, an unused steer box goes, a used one
// stays (it names the steer task it sent) but sends no more.
export function endSteer(node) {
  if (node.dataset.compose !== "steer") return;
  if (node.querySelector(".compose-status[data-sent-task-id]")) {
    node.querySelectorAll(".compose-form textarea, .compose-form button[type=submit]").forEach((n) => { n.disabled = true; });
  } else {
    closeCompose(node);
  }
}
