// The local control plane's page: devices, tasks and their live progress cards.
// Data only ever reaches the DOM through textContent / attributes (see el()), never
// innerHTML, so nothing a device or a prompt contains can run here.
"use strict";

const devices = new Map();
const tasks = new Map();
const ACTIVE = new Set(["queued", "running"]);
const RETRYABLE = new Set(["abandoned", "failed"]);
const CONTINUABLE = new Set(["completed", "failed", "cancelled"]);
const INTENT_LABELS = { computer_use: "computer use", thread_collaboration: "collaboration" };
const TITLE_CHARS = 200;

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "data") for (const [k, v] of Object.entries(value)) node.dataset[k] = String(v);
    else if (key === "on") for (const [k, v] of Object.entries(value)) node.addEventListener(k, v);
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function when(iso) {
  if (!iso) return "never";
  const date = new Date(iso);
  return isNaN(date) ? String(iso) : date.toLocaleString();
}

function section(title, cls, ...children) {
  return el("div", { class: cls }, el("h3", {}, title), ...children);
}

// ---- the session: kept in this origin's storage, sent in a header by this script only ----
// A cookie would be sent by the browser by itself, to every port of 127.0.0.1: never enough here.
const SESSION_KEY = "boss-session";

function takeSessionFromAddress() {
  const params = new URLSearchParams(location.hash.slice(1));
  if (!params.has("session")) return;
  localStorage.setItem(SESSION_KEY, params.get("session"));
  history.replaceState(null, "", location.pathname);  // the session leaves the address bar and history
}

function authHeaders() {
  const session = localStorage.getItem(SESSION_KEY);
  return session ? { Authorization: `Bearer ${session}` } : {};
}

async function call(method, path, body) {
  const headers = authHeaders();
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method, headers, credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error((data.error && data.error.message) || `HTTP ${response.status}`);
  return data;
}

// Server-sent events over fetch (EventSource cannot send a header): calls
// handlers[event](data) per frame; resolves with the HTTP status when the stream ends.
async function readEvents(path, handlers) {
  const response = await fetch(path, { headers: authHeaders(), credentials: "same-origin", cache: "no-store" });
  if (!response.ok || !response.body) return response.status;
  handlers.open();
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return response.status;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let kind = "message";
      let data = "";
      for (const line of frame.split("\n")) {
        if (line.startsWith("event: ")) kind = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (data && handlers[kind]) handlers[kind](JSON.parse(data));
    }
  }
}

// ---- devices -------------------------------------------------------------------

function capabilityChips(caps) {
  if (!caps) return [el("span", { class: "chip off" }, "no heartbeat yet")];
  const chips = [];
  const app = caps.codexAppServer || {};
  const chip = (on, text) => el("span", { class: on ? "chip" : "chip off", data: { capability: text } }, text);
  chips.push(chip(app.available, `codex app-server ${app.version || ""} ${app.transport || ""}`.trim()));
  const meta = app.metadata || {};
  if (meta.defaultModel) chips.push(chip(true, `model ${meta.defaultModel}`));
  if (Array.isArray(meta.models)) chips.push(chip(true, `${meta.models.length} models`));
  if (meta.error) chips.push(chip(false, `discovery: ${meta.error}`));
  chips.push(chip((caps.codexExec || {}).available, "codex exec"));
  const cu = caps.computerUse || {};
  chips.push(chip(cu.codex || (cu.cuaDriver || {}).available, "computer use"));
  return chips;
}

function renderDevice(device) {
  const system = device.system || {};
  const node = el("li", { class: "device", data: { deviceId: device.deviceId, revoked: device.revoked } },
    el("div", { class: "name" }, device.deviceName || device.hostname || device.deviceId),
    el("div", { class: "meta" },
      [device.hostname, device.platform, device.arch, device.agentVersion && `boss-agent ${device.agentVersion}`]
        .filter(Boolean).join(" · ")),
    el("div", { class: "meta" },
      el("span", { class: "state" }, device.revoked ? "revoked" : device.state || "unknown"), " · last heartbeat ",
      el("span", { class: "last-heartbeat" }, when(device.lastHeartbeatAt)),
      system.cpuCount ? ` · ${system.cpuCount} CPUs` : "",
      system.memAvailableMb ? ` · ${system.memAvailableMb} MB free` : ""),
    el("div", { class: "caps" }, capabilityChips(device.capabilities)),
    device.revoked ? null : el("div", { class: "task-actions" },
      el("button", { type: "button", class: "revoke", on: { click: () => act(node, "POST",
        `/api/local/devices/${encodeURIComponent(device.deviceId)}/revoke`) } }, "Revoke")));
  const old = document.querySelector(`#devices [data-device-id="${CSS.escape(device.deviceId)}"]`);
  if (old) old.replaceWith(node); else document.getElementById("devices").append(node);
  document.getElementById("no-devices").hidden = devices.size > 0;
}

// ---- the progress card ---------------------------------------------------------------

// Codex's reasoning summaries mark their headline **like this**: shown bold, still as text nodes.
function withBold(text) {
  return String(text).split(/\*\*(.+?)\*\*/s).map((part, i) => (i % 2 ? el("strong", {}, part) : part));
}

function list(items, render) {
  return el("ul", {}, (items || []).map(render));
}

function approvalsOf(view) {
  const byId = new Map();
  for (const a of view.approvals || []) byId.set(a.approvalId, { ...a, actionable: true });
  const card = view.executionProgress || {};
  for (const a of card.approvals || []) {
    if (a && !byId.has(a.id)) byId.set(a.id, { approvalId: a.id, kind: a.kind, risk: a.risk,
      summary: a.summary, status: a.status, actionable: false });
  }
  return [...byId.values()];
}

function decisionText(view, approval) {
  if (approval.status === "pending" && view.status !== "running") return "not answered";
  if (approval.status === "withdrawn") return `withdrawn (${approval.withdrawReason || "no longer asked"})`;
  if (approval.status !== "decided") return approval.status;
  return typeof approval.decision === "string" ? `decided: ${approval.decision}` : "answered";
}

// What the request says besides its summary: Codex's reason, the permissions asked,
// an MCP server's message and the address it wants opened.
function approvalFacts(approval) {
  const facts = [];
  if (approval.reason) facts.push(el("div", { class: "meta reason" }, `Reason: ${approval.reason}`));
  for (const p of approval.permissions || []) facts.push(el("div", { class: "meta permission" }, `Asks for: ${p}`));
  if (approval.message) facts.push(el("div", { class: "meta message" }, approval.message));
  if (approval.url) facts.push(el("div", { class: "meta url" }, `Open: ${approval.url}`));
  return facts;
}

function renderApproval(view, approval) {
  const pending = approval.actionable && approval.status === "pending" && view.status === "running";
  const node = el("li", { class: "approval", data: { approvalId: approval.approvalId, status: approval.status } },
    el("div", {}, el("strong", { class: "kind" }, approval.kind || "approval"),
      approval.risk ? el("span", { class: "chip risk" }, `${approval.risk} risk`) : null, " ",
      el("span", { class: "summary" }, approval.summary || "")),
    approvalFacts(approval),
    el("div", { class: "meta decision" }, decisionText(view, approval)));
  const path = `/api/local/approvals/${encodeURIComponent(view.taskId)}/${encodeURIComponent(approval.approvalId)}`;
  if (pending && approval.kind === "userInput" && (approval.questions || []).length) {
    node.append(renderQuestions(approval, node, path));
  } else if (pending && approval.kind === "elicitation" && approval.schema) {
    node.append(renderForm(approval, node, path));
  } else if (pending) {
    const labels = { accept: "Approve", acceptForSession: "Approve for session", decline: "Decline", cancel: "Cancel turn" };
    node.append(el("div", { class: "actions" }, (approval.availableDecisions || ["accept", "decline"]).map((d) =>
      el("button", { type: "button", data: { decision: d }, on: { click: () => act(node, "POST", path,
        { decision: d }) } }, labels[d] || d))));
  }
  return node;
}

function declineButtons(approval, node, path) {
  const declines = (approval.availableDecisions || ["decline"]).filter((d) => !d.startsWith("accept"));
  return declines.map((d) => el("button", { type: "button", data: { decision: d },
    on: { click: () => act(node, "POST", path, { decision: d }) } }, d === "decline" ? "Decline" : d));
}

// A userInput request: one fieldset per question (its options as radio buttons, plus
// free text), answered as {answers: {id: [text]}}.
function renderQuestions(approval, node, path) {
  const fields = approval.questions.map((q, index) => {
    const name = `q-${approval.approvalId}-${index}`;
    return el("fieldset", { class: "question", data: { questionId: q.id } },
      el("legend", {}, q.header || `Question ${index + 1}`),
      el("p", {}, q.question || ""),
      (q.options || []).map((o) => el("label", { class: "option" },
        el("input", { type: "radio", name, value: o.label }), " ", o.label,
        o.description ? el("span", { class: "meta" }, ` — ${o.description}`) : null)),
      q.allowOther === false && (q.options || []).length ? null
        : el("input", { type: q.secret ? "password" : "text", class: "other", name: `${name}-other`,
          placeholder: (q.options || []).length ? "Or type another answer" : "Your answer" }));
  });
  const send = () => {
    const answers = {};
    fields.forEach((field) => {
      const other = field.querySelector("input.other");
      const typed = other ? other.value.trim() : "";
      const picked = field.querySelector("input[type=radio]:checked");
      const text = typed || (picked && picked.value);
      if (text) answers[field.dataset.questionId] = [text];
    });
    act(node, "POST", path, { decision: { answers } });
  };
  return el("div", { class: "questions" }, fields, el("div", { class: "actions" },
    el("button", { type: "button", data: { decision: "answers" }, on: { click: send } }, "Send answers"),
    declineButtons(approval, node, path)));
}

// An MCP form (elicitation): one input per property of its schema, accepted with
// {decision: "accept", content: {name: value}}.
function renderForm(approval, node, path) {
  const props = (approval.schema && approval.schema.properties) || {};
  const fields = Object.entries(props).map(([name, field]) => {
    const label = field.title || name;
    const input = Array.isArray(field.enum)
      ? el("select", { name }, field.enum.map((v) => el("option", { value: v }, v)))
      : el("input", { name, type: field.type === "boolean" ? "checkbox" : field.type === "number" || field.type === "integer" ? "number" : "text" });
    return el("label", { class: "form-field", data: { field: name, type: field.type || "string" } }, label, " ", input);
  });
  const send = () => {
    const content = {};
    fields.forEach((label) => {
      const input = label.querySelector("input, select");
      const type = label.dataset.type;
      if (type === "boolean") content[label.dataset.field] = input.checked;
      else if ((type === "number" || type === "integer") && input.value !== "") content[label.dataset.field] = Number(input.value);
      else if (input.value !== "") content[label.dataset.field] = input.value;
    });
    act(node, "POST", path, { decision: "accept", content });
  };
  return el("div", { class: "elicitation-form" }, fields, el("div", { class: "actions" },
    el("button", { type: "button", data: { decision: "accept" }, on: { click: send } }, "Send"),
    declineButtons(approval, node, path)));
}

// The card's smaller facts, one chip each (thread, model, account, helpers).
function cardDetails(card) {
  const chips = [];
  const chip = (key, text) => chips.push(el("span", { class: "chip", data: { detail: key } }, text));
  const thread = card.threadStatus;
  if (thread && thread.state) chip("thread", `thread ${thread.state}`);
  if (card.threadGoal && card.threadGoal.text) chip("goal", `goal: ${card.threadGoal.text}`);
  const settings = card.threadSettings || {};
  if (settings.model) chip("model", [settings.model, settings.reasoningEffort].filter(Boolean).join(" "));
  if (card.modelRoute) chip("route", `rerouted ${card.modelRoute.from} → ${card.modelRoute.to}`);
  if (card.modelVerification && card.modelVerification.status) chip("verification", `model ${card.modelVerification.status}`);
  const account = card.accountStatus || {};
  if (account.rateLimited) chip("rate-limit", "rate limited");
  else if (account.primaryUsedPercent != null) chip("usage", `${account.primaryUsedPercent}% of plan used`);
  if (card.compaction && card.compaction.count) chip("compaction", `compacted ×${card.compaction.count}`);
  if (card.realtime && card.realtime.state) chip("realtime", `realtime ${card.realtime.state}`);
  for (const s of card.mcpServers || []) chip("mcp", `MCP ${s.name}: ${s.status}`);
  for (const a of card.backgroundAgents || []) chip("agent", `agent ${a.name}: ${a.status}`);
  for (const c of card.threadCollaboration || []) chip("collaboration", `${c.tool}: ${c.status}`);
  return chips;
}

function renderCard(view) {
  const card = view.executionProgress || {};
  const result = view.result || {};
  const parts = [];
  if (card.steps && card.steps.length) parts.push(section("Steps", "steps",
    list(card.steps, (s) => el("li", { class: "step", data: { status: s.status } }, s.title))));
  if (card.reasoningSummary && card.reasoningSummary.text) parts.push(section("Thinking", "reasoning",
    el("div", {}, withBold(card.reasoningSummary.text))));
  if (card.toolActivities && card.toolActivities.length) parts.push(section("Tools", "tools",
    list(card.toolActivities, (t) => el("li", { class: "tool", data: { status: t.status } },
      [t.summary || t.kind, t.name, t.status].filter(Boolean).join(" · ")))));
  const approvals = approvalsOf(view);
  if (approvals.length) parts.push(section("Approvals", "approvals",
    el("ul", {}, approvals.map((a) => renderApproval(view, a)))));
  if (card.fileChanges && card.fileChanges.length) parts.push(section("Files", "file-changes",
    list(card.fileChanges, (f) => el("li", { class: "file-change", data: { change: f.change } },
      `${f.change} ${f.path}`))));
  if (card.branch) {
    const b = card.branch;
    parts.push(section("Branch", "branch", el("div", {}, [b.name, b.changedFiles != null && `${b.changedFiles} file${b.changedFiles === 1 ? "" : "s"}`,
      b.insertions != null && `+${b.insertions}`, b.deletions != null && `−${b.deletions}`,
      b.githubCli && `gh ${b.githubCli}`].filter(Boolean).join(" · "))));
  }
  if (card.artifacts && card.artifacts.length) parts.push(section("Artifacts", "artifacts",
    list(card.artifacts, (a) => el("li", {}, `${a.name} (${a.kind})`))));
  if (card.tokenUsage) {
    const u = card.tokenUsage;
    parts.push(section("Tokens", "token-usage", el("div", {}, [`${u.totalTokens ?? "?"} total`,
      u.inputTokens != null && `${u.inputTokens} in`, u.outputTokens != null && `${u.outputTokens} out`,
      u.contextWindow && `window ${u.contextWindow}`].filter(Boolean).join(" · "))));
  }
  if (card.warnings && card.warnings.length) parts.push(section("Warnings", "warnings",
    list(card.warnings, (w) => el("li", { class: "warning" }, w.message || w.kind))));
  const details = cardDetails(card);
  if (details.length) parts.push(section("Details", "details", el("div", { class: "caps" }, details)));
  const answer = result.resultText || card.answerPreview;
  if (answer) parts.push(section(result.resultText ? "Result" : "Answer so far", "answer-section",
    el("div", { class: "answer" }, answer)));
  if (result.error) parts.push(section("Error", "error",
    el("div", {}, `${result.error.code}: ${result.error.message || ""}`)));
  return el("div", { class: "card" }, parts);
}

function taskNode(taskId) {
  return document.querySelector(`#tasks > li.task[data-task-id="${CSS.escape(taskId)}"]`);
}

function taskButton(cls, label, onClick) {
  return el("button", { type: "button", class: cls, on: { click: onClick } }, label);
}

function taskActions(view) {
  const path = `/api/local/tasks/${encodeURIComponent(view.taskId)}`;
  const node = () => taskNode(view.taskId);
  const actions = [];
  if (view.status === "running" && view.turnId && view.codexThreadRef) {
    actions.push(taskButton("steer", "Steer", () => openCompose(node(), "steer")));
  }
  if (CONTINUABLE.has(view.status) && view.codexThreadRef) {
    actions.push(taskButton("continue", "Continue", () => openCompose(node(), "continue")));
  }
  if (view.codexThreadRef) {
    actions.push(taskButton("thread", "Thread", () => { location.hash = `thread=${encodeURIComponent(view.codexThreadRef)}`; }));
  }
  if (ACTIVE.has(view.status) && !view.cancelRequested) {
    actions.push(taskButton("cancel", "Cancel", () => act(node(), "POST", `${path}/cancel`)));
  }
  if (RETRYABLE.has(view.status)) actions.push(taskButton("retry", "Retry", () => act(node(), "POST", `${path}/retry`)));
  return actions;
}

// Everything of a task that is redrawn on each change; the compose box beside it is
// kept, so a message being typed survives the live updates of a running task.
function taskBody(view) {
  const card = view.executionProgress || {};
  const spec = view.task || {};
  const title = (view.title || "").slice(0, TITLE_CHARS);
  const shown = view.status === "running" && card.status ? card.status : view.status;
  const actions = taskActions(view);
  return el("div", { class: "task-body" },
    el("div", { class: "task-head" },
      el("span", { class: "title", title: title }, title || view.taskId),
      el("span", { class: "status", data: { status: shown } }, shown)),
    el("div", { class: "meta" }, [view.taskId, INTENT_LABELS[spec.intentCategory], spec.targetCodexTurnId && "steer",
      `attempt ${view.attempt}`,
      view.deviceId && `on ${(devices.get(view.deviceId) || {}).deviceName || view.deviceId}`,
      card.backend || (view.result && view.result.backend), view.cancelRequested && "cancel requested",
      `created ${when(view.createdAt)}`].filter(Boolean).join(" · ")),
    renderCard(view),
    actions.length ? el("div", { class: "task-actions" }, actions) : null);
}

function renderTask(view) {
  let node = taskNode(view.taskId);
  if (node) {
    node.querySelector(".task-body").replaceWith(taskBody(view));
  } else {
    node = el("li", { class: "task", data: { taskId: view.taskId } }, taskBody(view), el("div", { class: "compose" }));
    document.getElementById("tasks").prepend(node);
  }
  node.dataset.status = view.status;
  node.dataset.thread = view.codexThreadRef || "";
  // A steer needs the live turn: once it has ended, an unused steer box goes, a used one
  // stays (it names the steer task it sent) but sends no more.
  if (node.dataset.compose === "steer" && view.status !== "running") {
    if (node.querySelector(".compose-status[data-sent-task-id]")) {
      node.querySelectorAll(".compose-form textarea, .compose-form button[type=submit]").forEach((n) => { n.disabled = true; });
    } else {
      closeCompose(node);
    }
  }
  showThreadOf(node);
  document.getElementById("no-tasks").hidden = tasks.size > 0;
}

// ---- steer and continue: a message to the task's live turn or a new turn on its thread -----

function openCompose(node, mode) {
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

// Submit one task; ``status`` says how it went. The new task's id, or null on an error.
async function postTask(body, status) {
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

function closeCompose(node) {
  delete node.dataset.compose;
  node.querySelector(".compose").replaceChildren();
}

// ---- the thread view: #thread=REF shows that thread's tasks only, oldest first ---------------

function currentThread() {
  const match = /^#thread=(.+)$/.exec(location.hash);
  return match ? decodeURIComponent(match[1]) : null;
}

function showThreadOf(node) {
  const thread = currentThread();
  node.hidden = thread !== null && node.dataset.thread !== thread;
}

function applyThreadView() {
  const thread = currentThread();
  const list = document.getElementById("tasks");
  const bar = document.getElementById("thread-bar");
  if (thread === null) delete list.dataset.thread; else list.dataset.thread = thread;
  list.querySelectorAll(".task").forEach(showThreadOf);
  bar.hidden = thread === null;
  document.getElementById("thread-name").textContent = thread || "";
}

// ---- actions and the live stream ----------------------------------------------------

async function act(node, method, path, body) {
  const buttons = node ? node.querySelectorAll("button") : [];
  buttons.forEach((b) => { b.disabled = true; });
  try {
    await call(method, path, body);  // the change itself arrives over the event stream
  } catch (err) {
    buttons.forEach((b) => { b.disabled = false; });
    if (node) node.append(el("div", { class: "action-error" }, err.message));
  }
}

function setConnection(state, text) {
  const badge = document.getElementById("connection");
  badge.dataset.state = state;
  badge.textContent = text;
}

const RECONNECT_MS = 3000;  // after the server went away (a restart): try again this often

function onSnapshot(data) {
  devices.clear(); tasks.clear();
  document.getElementById("devices").replaceChildren();
  document.getElementById("tasks").replaceChildren();
  for (const d of data.devices) devices.set(d.deviceId, d);
  for (const t of data.tasks) tasks.set(t.taskId, t);
  data.devices.forEach(renderDevice);
  [...data.tasks].reverse().forEach(renderTask);  // newest first: prepend oldest first
  document.getElementById("no-devices").hidden = devices.size > 0;
  document.getElementById("no-tasks").hidden = tasks.size > 0;
}

async function connect() {
  const status = await readEvents("/api/local/events", {
    open: () => { setConnection("live", "live"); showRole(); },
    snapshot: (data) => { onSnapshot(data); noticeApprovals(); },
    device: (d) => { devices.set(d.deviceId, d); renderDevice(d); },
    task: (t) => { tasks.set(t.taskId, t); renderTask(t); noticeApprovals(); },
    phones: (data) => renderPhones(data.phones),  // phones.js; sent to the owner's page only
  }).catch(() => 0);
  if (status === 401) {
    if (document.body.dataset.role === "phone") {  // revoked: what it showed is no longer its to see
      onSnapshot({ devices: [], tasks: [] });
      setConnection("unauthorized", "this phone is no longer paired: pair it again with boss-agent phone pair");
    } else {
      setConnection("unauthorized", "not signed in: open the page URL printed by boss-agent up (or boss-agent page)");
    }
    return;
  }
  setConnection("offline", "offline, retrying…");
  setTimeout(connect, RECONNECT_MS);
}

function setUp() {
  takeSessionFromAddress();
  const form = document.getElementById("submit-form");
  const status = document.getElementById("submit-status");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const body = { prompt: data.get("prompt"), approvalMode: data.get("approvalMode"),
      intentCategory: data.get("intentCategory") };
    if (String(data.get("workdir") || "").trim()) body.workdir = String(data.get("workdir")).trim();
    const taskId = await postTask(body, status);
    if (taskId) { status.dataset.taskId = taskId; form.elements.prompt.value = ""; }
  });
  document.getElementById("pairing-button").addEventListener("click", async () => {
    const out = document.getElementById("pairing-code");
    try {
      const answer = await call("POST", "/api/local/pairing-codes", {});
      out.textContent = answer.pairingCode;
      out.title = `valid for ${Math.round(answer.expiresInS / 60)} minutes`;
    } catch (err) {
      out.textContent = err.message;
    }
  });
  document.querySelector("#thread-bar button").addEventListener("click", () => {
    history.replaceState(null, "", location.pathname);
    applyThreadView();
  });
  window.addEventListener("hashchange", applyThreadView);
  applyThreadView();
  if (!startPairing()) connect();  // phones.js: a phone with a #pair= code pairs first
}

document.addEventListener("DOMContentLoaded", setUp);
