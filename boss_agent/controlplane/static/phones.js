// Phones: pairing this phone (#pair=CODE&fp=…), "Add a phone" and the phone list (the
// owner's page), and telling the person that an approval waits (title, notification,
// vibration). Data reaches the DOM through textContent / attributes only (render.js).

import { SESSION_KEY, call } from "./api.js";
import { act, el, setConnection, when } from "./render.js";
import { isLive } from "./statuses.js";
import { tasks } from "./store.js";

const SVG_NS = "http://www.w3.org/2000/svg";
const VIBRATION_MS = [200, 100, 200];  // two short pulses: noticeable, not alarming
const BASE_TITLE = document.title;
let role = null;  // "owner" or "phone", once the session is known
let notifiedApprovals = new Set();

// ---- pairing this phone: the code from the address's fragment, traded for a token ----

// With a #pair= code in the address: show the pairing form, call onPaired() once paired; true.
export function startPairing(onPaired) {
  const params = new URLSearchParams(location.hash.slice(1));
  if (!params.has("pair")) return false;
  const code = params.get("pair");
  history.replaceState(null, "", location.pathname);  // the code leaves the address bar and history
  const section = document.getElementById("pair-section");
  section.hidden = false;
  document.body.dataset.pairing = "";
  document.getElementById("pair-fp").textContent = params.get("fp") || "(a certificate this machine did not make)";
  const form = document.getElementById("pair-form");
  const status = document.getElementById("pair-status");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    status.textContent = "pairing…";
    try {
      const answer = await call("POST", "/api/local/phones/pair", { code, name: form.elements.name.value.trim() });
      localStorage.setItem(SESSION_KEY, answer.token);
      section.hidden = true;
      delete document.body.dataset.pairing;
      onPaired();
    } catch (err) {
      status.textContent = err.message;
    }
  });
  setConnection("unpaired", "not paired yet");
  return true;
}

// ---- who is this page: the owner on this machine, or a paired phone ----

export async function showRole() {
  let me;
  try { me = await call("GET", "/api/local/whoami"); } catch { return; }
  role = me.role;
  document.body.dataset.role = role;
  document.getElementById("phones-section").hidden = role !== "owner";
  const fp = document.getElementById("fingerprint");
  fp.textContent = me.fingerprint ? `certificate ${me.fingerprint}` : "";
  if (role === "owner") refreshPhones();
}

// ---- the owner's page: add a phone, list and revoke phones ----

function qrSvg(rows) {
  const svg = document.createElementNS(SVG_NS, "svg");
  const size = rows.length;
  svg.setAttribute("viewBox", `0 0 ${size} ${size}`);
  svg.setAttribute("shape-rendering", "crispEdges");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", "QR code of the phone's pairing address");
  const back = document.createElementNS(SVG_NS, "rect");
  back.setAttribute("width", size); back.setAttribute("height", size); back.setAttribute("fill", "#fff");
  svg.append(back);
  let d = "";
  rows.forEach((row, y) => { for (let x = 0; x < row.length; x++) if (row[x] === "1") d += `M${x} ${y}h1v1h-1z`; });
  const path = document.createElementNS(SVG_NS, "path");
  path.setAttribute("d", d);
  path.setAttribute("fill", "#000");
  svg.append(path);
  return svg;
}

async function addPhone() {
  const box = document.getElementById("phone-offer");
  try {
    const offer = await call("POST", "/api/local/phones/codes", {});
    const link = el("a", { href: offer.url, class: "offer-url" }, offer.url);
    box.replaceChildren(
      el("p", {}, "Scan this with the phone's camera, or open the address on it:"),
      el("div", { class: "qr" }, qrSvg(offer.qr)), el("p", {}, link),
      el("p", { class: "meta" }, "Code ", el("code", { class: "offer-code" }, offer.code),
        ` · one use, until ${when(offer.expiresAt)}`),
      offer.fingerprint ? el("p", { class: "meta" }, `Certificate ${offer.fingerprint}`) : null);
  } catch (err) {
    box.replaceChildren(el("p", { class: "action-error" }, err.message));
  }
  box.hidden = false;
}

export function renderPhones(phones) {
  document.getElementById("phones").replaceChildren(...phones.map((p) => {
    const node = el("li", { class: "phone", data: { phoneId: p.phoneId } },
      el("div", { class: "name" }, p.name),
      el("div", { class: "meta" }, `paired ${when(p.createdAt)} · last seen ${when(p.lastSeenAt)}`),
      el("div", { class: "task-actions" }, el("button", { type: "button", class: "revoke", on: { click: async () => {
        await act(node, "POST", `/api/local/phones/${encodeURIComponent(p.phoneId)}/revoke`);
      } } }, "Revoke")));
    return node;
  }));
  document.getElementById("no-phones").hidden = phones.length > 0;
  if (phones.length) document.getElementById("phone-offer").hidden = true;  // it was used
}

async function refreshPhones() {
  try { renderPhones((await call("GET", "/api/local/phones")).phones); } catch { /* shown on next try */ }
}

// ---- an approval or a question starts waiting: title, notification, vibration ----

function waitingApprovals() {
  const waiting = [];
  for (const view of tasks.values()) {
    if (!isLive(view.status)) continue;
    for (const a of view.approvals || []) if (a.status === "pending") waiting.push({ view, approval: a });
  }
  return waiting;
}

async function notify(view, approval) {
  const title = approval.kind === "userInput" ? "A question waits" : "An approval waits";
  const options = { body: approval.summary || view.title || view.taskId, tag: approval.approvalId,
    data: { taskId: view.taskId } };
  try {
    if (!("Notification" in window) || Notification.permission !== "granted") return;
    const registration = await navigator.serviceWorker.ready;
    await registration.showNotification(title, options);
    document.body.dataset.notified = approval.approvalId;  // the last one shown (a test can wait on it)
  } catch { /* notifications are a courtesy: the title and the page still say it */ }
}

export function noticeApprovals() {
  const waiting = waitingApprovals();
  document.title = waiting.length ? `(${waiting.length}) approval${waiting.length === 1 ? "" : "s"} waiting` : BASE_TITLE;
  const fresh = waiting.filter((w) => !notifiedApprovals.has(w.approval.approvalId));
  notifiedApprovals = new Set(waiting.map((w) => w.approval.approvalId));
  if (!fresh.length) return;
  if (navigator.vibrate) navigator.vibrate(VIBRATION_MS);
  fresh.forEach((w) => notify(w.view, w.approval));
}

function setUpNotifications() {
  if ("serviceWorker" in navigator) navigator.serviceWorker.register("/sw.js").catch(() => {});
  const button = document.getElementById("notify-button");
  if (!("Notification" in window) || Notification.permission !== "default") return;
  button.hidden = false;
  button.addEventListener("click", async () => {
    await Notification.requestPermission();
    button.hidden = Notification.permission !== "default";
  });
}

export function setUpPhones() {
  document.getElementById("add-phone").addEventListener("click", addPhone);
  setUpNotifications();
}
