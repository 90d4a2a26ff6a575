// A task's progress card (device API §5): one section per part the card has, each keyed
// by its name and redrawn only when what it shows changed; the approvals section is
// updated in place (approvals.js), so an answer being typed there is never redrawn.

import { approvalsOf, renderApprovals } from "./approvals.js";
import { el, list, reconcile, section, withBold } from "./render.js";

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

const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

function branchText(b) {
  return [b.name, b.changedFiles != null && plural(b.changedFiles, "file"), b.insertions != null && `+${b.insertions}`,
    b.deletions != null && `−${b.deletions}`, b.githubCli && `gh ${b.githubCli}`].filter(Boolean).join(" · ");
}

function tokenText(u) {
  return [`${u.totalTokens ?? "?"} total`, u.inputTokens != null && `${u.inputTokens} in`,
    u.outputTokens != null && `${u.outputTokens} out`, u.contextWindow && `window ${u.contextWindow}`]
    .filter(Boolean).join(" · ");
}

const some = (items) => Array.isArray(items) && items.length > 0;

// A section that is redrawn whole when what it shows changed.
const plain = (key, title, body) => ({ key, make: () => section(title, key, body()) });

// The approvals section, updated in place.
function approvalsPart(view, approvals) {
  const update = (node) => renderApprovals(node.querySelector("ul"), view, approvals);
  return { key: "approvals", update, make: () => section("Approvals", "approvals", el("ul")) };
}

// The sections the card has now, in the order shown.
function sections(view) {
  const card = view.executionProgress || {};
  const result = view.result || {};
  const approvals = approvalsOf(view);
  const details = cardDetails(card);
  const answer = result.resultText || card.answerPreview;
  return [
    some(card.steps) && plain("steps", "Steps",
      () => list(card.steps, (s) => el("li", { class: "step", data: { status: s.status } }, s.title))),
    card.reasoningSummary && card.reasoningSummary.text && plain("reasoning", "Thinking",
      () => el("div", {}, withBold(card.reasoningSummary.text))),
    some(card.toolActivities) && plain("tools", "Tools", () => list(card.toolActivities, (t) =>
      el("li", { class: "tool", data: { status: t.status } }, [t.summary || t.kind, t.name, t.status].filter(Boolean).join(" · ")))),
    approvals.length && approvalsPart(view, approvals),
    some(card.fileChanges) && plain("file-changes", "Files", () => list(card.fileChanges, (f) =>
      el("li", { class: "file-change", data: { change: f.change } }, `${f.change} ${f.path}`))),
    card.branch && plain("branch", "Branch", () => el("div", {}, branchText(card.branch))),
    some(card.artifacts) && plain("artifacts", "Artifacts", () => list(card.artifacts, (a) => el("li", {}, `${a.name} (${a.kind})`))),
    card.tokenUsage && plain("token-usage", "Tokens", () => el("div", {}, tokenText(card.tokenUsage))),
    some(card.warnings) && plain("warnings", "Warnings", () => list(card.warnings, (w) => el("li", { class: "warning" }, w.message || w.kind))),
    details.length && plain("details", "Details", () => el("div", { class: "caps" }, details)),
    answer && plain("answer-section", result.resultText ? "Result" : "Answer so far", () => el("div", { class: "answer" }, answer)),
    result.error && plain("error", "Error", () => el("div", {}, `${result.error.code}: ${result.error.message || ""}`)),
  ].filter(Boolean);
}

// Update `node` (a div.card) to show view's card.
export function renderCard(node, view) {
  reconcile(node, sections(view));
}
