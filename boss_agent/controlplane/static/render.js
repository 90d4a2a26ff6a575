// DOM helpers. Data only ever reaches the DOM through textContent and attributes (el()),
// never innerHTML, so nothing a device or a prompt contains can run here.
//
// Keyed rendering (reconcile()): each task, approval and form is an element keyed by
// its id, made once and then updated in place, so an input being typed in keeps its
// text, selection and focus while progress arrives around it.

import { call } from "./api.js";

export function el(tag, attrs = {}, ...children) {
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

export function when(iso) {
  if (!iso) return "never";
  const date = new Date(iso);
  return isNaN(date) ? String(iso) : date.toLocaleString();
}

export function section(title, cls, ...children) {
  return el("div", { class: cls }, el("h3", {}, title), ...children);
}

export function list(items, render) {
  return el("ul", {}, (items || []).map(render));
}

// Codex's reasoning summaries mark their headline **like this**: shown bold, still as text nodes.
export function withBold(text) {
  return String(text).split(/\*\*(.+?)\*\*/s).map((part, i) => (i % 2 ? el("strong", {}, part) : part));
}

// Make parent's keyed children (data-key) exactly `parts`, in order. A part is
// {key, make, update?}: a new key is made (make(), then update(node) if given); a key
// already there stays the same element, updated by update(node), or, with no update,
// swapped for make() only when what it shows changed (so such a part's listeners may
// only use what its key fixes); a key no longer listed leaves. Unkeyed children (an action's error) stay, after the keyed ones.
export function reconcile(parent, parts) {
  const old = new Map();
  for (const child of parent.children) if (child.dataset.key !== undefined) old.set(child.dataset.key, child);
  const nodes = parts.map(({ key, make, update }) => {
    const existing = old.get(key);
    if (existing && update) { update(existing); return existing; }
    const fresh = make();
    fresh.dataset.key = key;
    if (update) update(fresh);
    return existing && existing.isEqualNode(fresh) ? existing : fresh;
  });
  const wanted = new Set(nodes);
  for (const node of old.values()) if (!wanted.has(node)) node.remove();
  keepingFocus(() => nodes.forEach((node, i) => {
    const at = parent.children[i] || null;
    if (at !== node) place(parent, node, at);
  }));
}

// moveBefore() moves an element without taking it out of the document (its focus and
// state stay); where a browser lacks it, insertBefore() and keepingFocus() do.
function place(parent, node, before) {
  if (parent.moveBefore && node.isConnected && parent.isConnected) parent.moveBefore(node, before);
  else parent.insertBefore(node, before);
}

function keepingFocus(work) {
  const active = document.activeElement;
  const start = active && active.selectionStart;
  const end = active && active.selectionEnd;
  work();
  if (!active || active === document.activeElement || !active.isConnected) return;
  active.focus({ preventScroll: true });
  if (typeof start === "number") active.setSelectionRange(start, end);
}

// A button's action: its buttons wait for the answer; the change itself arrives over the
// event stream. On an error the buttons come back and the error is shown under them.
export async function act(node, method, path, body) {
  const buttons = node ? node.querySelectorAll("button") : [];
  buttons.forEach((b) => { b.disabled = true; });
  try {
    await call(method, path, body);
  } catch (err) {
    buttons.forEach((b) => { b.disabled = false; });
    if (node) node.append(el("div", { class: "action-error" }, err.message));
  }
}

export function setConnection(state, text) {
  const badge = document.getElementById("connection");
  badge.dataset.state = state;
  badge.textContent = text;
}
