// A task's approvals and questions, each an element keyed by its id: while one is
// pending, its buttons, question fields or MCP form are made once and kept, so what the
// person types survives every update; once decided or withdrawn they and its detail go,
// its summary and decision stay.

import { act, el, reconcile } from "./render.js";
import { isLive } from "./statuses.js";

const DECISION_LABELS = { accept: "Approve", acceptForSession: "Approve for session", decline: "Decline",
  cancel: "Cancel turn" };
const KEEP = () => {};  // an update that leaves the part as it is

// The approvals the control plane can still take a decision for, then those only the card lists.
export function approvalsOf(view) {
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
  if (approval.status === "pending" && !isLive(view.status)) return "not answered";
  if (approval.status === "withdrawn") return `withdrawn (${approval.withdrawReason || "no longer asked"})`;
  if (approval.status !== "decided") return approval.status;
  return typeof approval.decision === "string" ? `decided: ${approval.decision}` : "answered";
}

// What the request says besides its summary: Codex's reason, the permissions asked,
// an MCP server's message and the address it wants opened.
function approvalFacts(approval) {
  const facts = [];
  if (approval.reason) facts.push(el("div", { class: "meta reason" }, `Reason: ${approval.reason}`));
  if (!(approval.detail && approval.detail.permissions)) {  // the detail lists them with access and scope
    for (const p of approval.permissions || []) facts.push(el("div", { class: "meta permission" }, `Asks for: ${p}`));
  }
  if (approval.message) facts.push(el("div", { class: "meta message" }, approval.message));
  if (approval.url) facts.push(el("div", { class: "meta url" }, `Open: ${approval.url}`));
  return facts;
}

// What accepting does (device API §6 detail): the warnings in plain words, the whole
// command (every line, monospace, wrapped), its directory when not the task's, every
// path of a patch or a permission, a tool's arguments. The device built and sanitized
// it (approval_view.py); the page only lays it out. Only pending approvals carry it.
function approvalWarnings(detail) {
  const paths = [...(detail.files || []), ...(detail.permissions || [])];
  return [
    detail.escalated && "runs outside the sandbox",
    (detail.outsideWorkspace || detail.grantRoot || paths.some((p) => p && p.outsideWorkspace)) &&
      "touches files outside the workspace",
    detail.network && "network",
    detail.truncated && "too long to show whole: cannot be accepted",
  ].filter(Boolean);
}

function approvalDetail(detail) {
  const parts = approvalWarnings(detail).map((w) => el("div", { class: "warning" }, `⚠ ${w}`));
  if (typeof detail.command === "string") {
    parts.push(el("pre", { class: "command" }, detail.command));
    if (detail.cwd && detail.cwd !== ".") parts.push(el("div", { class: "meta cwd" }, `in ${detail.cwd}`));
  }
  if (Array.isArray(detail.files)) parts.push(el("ul", { class: "paths" }, detail.files.map((f) =>
    el("li", { class: f.outsideWorkspace ? "outside" : null }, `${f.kind}: `, el("code", {}, f.path)))));
  if (Array.isArray(detail.permissions)) parts.push(el("ul", { class: "paths" }, detail.permissions.map((p) =>
    el("li", { class: p.outsideWorkspace ? "outside" : null }, `${p.access} (${p.scope}): `, el("code", {}, p.path)))));
  if ("tool" in detail) {
    parts.push(el("div", { class: "meta tool" }, `${detail.server} / ${detail.tool}`));
    parts.push(el("pre", { class: "arguments" }, typeof detail.arguments === "string"
      ? detail.arguments : JSON.stringify(detail.arguments, null, 2)));
  }
  return el("div", { class: "detail" }, parts);
}

function decisionButtons(decisions, node, path) {
  return decisions.map((d) => el("button", { type: "button", data: { decision: d },
    on: { click: () => act(node, "POST", path, { decision: d }) } }, DECISION_LABELS[d] || d));
}

function declineButtons(approval, node, path) {
  return decisionButtons((approval.availableDecisions || ["decline"]).filter((d) => !d.startsWith("accept")),
    node, path);
}

// A userInput request: one fieldset per question (its options as radio buttons, plus
// free text), answered as {answers: {id: [text]}}.
function questionsForm(approval, node, path) {
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

function formInput(name, field) {
  if (Array.isArray(field.enum)) return el("select", { name }, field.enum.map((v) => el("option", { value: v }, v)));
  const numeric = field.type === "number" || field.type === "integer";
  return el("input", { name, type: field.type === "boolean" ? "checkbox" : numeric ? "number" : "text" });
}

// An MCP form (elicitation): one input per property of its schema, accepted with
// {decision: "accept", content: {name: value}}.
function elicitationForm(approval, node, path) {
  const props = (approval.schema && approval.schema.properties) || {};
  const fields = Object.entries(props).map(([name, field]) => el("label",
    { class: "form-field", data: { field: name, type: field.type || "string" } },
    field.title || name, " ", formInput(name, field)));
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

// What the person answers with: made once while the approval is pending, then kept.
function answerPart(view, approval, node) {
  const path = `/api/local/approvals/${encodeURIComponent(view.taskId)}/${encodeURIComponent(approval.approvalId)}`;
  if (approval.kind === "userInput" && (approval.questions || []).length) {
    return { key: "questions", make: () => questionsForm(approval, node, path), update: KEEP };
  }
  if (approval.kind === "elicitation" && approval.schema) {
    return { key: "form", make: () => elicitationForm(approval, node, path), update: KEEP };
  }
  return { key: "buttons", update: KEEP, make: () => el("div", { class: "actions" },
    decisionButtons(approval.availableDecisions || ["accept", "decline"], node, path)) };
}

function approvalParts(view, approval, node) {
  const pending = approval.actionable && approval.status === "pending" && isLive(view.status);
  const detail = approval.detail && typeof approval.detail === "object" ? approval.detail : null;
  const facts = approvalFacts(approval);
  return [
    { key: "head", make: () => el("div", {}, el("strong", { class: "kind" }, approval.kind || "approval"),
      approval.risk ? el("span", { class: "chip risk" }, `${approval.risk} risk`) : null, " ",
      el("span", { class: "summary" }, approval.summary || "")) },
    detail && { key: "detail", make: () => approvalDetail(detail) },
    facts.length && { key: "facts", make: () => el("div", { class: "facts" }, facts) },
    { key: "decision", make: () => el("div", { class: "meta decision" }, decisionText(view, approval)) },
    pending && answerPart(view, approval, node),
  ].filter(Boolean);
}

function updateApproval(node, view, approval) {
  node.dataset.status = approval.status;
  reconcile(node, approvalParts(view, approval, node));
}

// The task's approvals (approvalsOf(view)), updated in place inside `list` (a <ul>).
export function renderApprovals(list, view, approvals) {
  reconcile(list, approvals.map((a) => ({
    key: a.approvalId,
    make: () => el("li", { class: "approval", data: { approvalId: a.approvalId } }),
    update: (node) => updateApproval(node, view, a),
  })));
}
