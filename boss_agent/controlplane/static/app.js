// The local control plane's page: devices, tasks and their live progress cards, phones.
// Plain ES modules, no build step: api.js (session, requests, events), render.js (DOM
// helpers, keyed rendering), statuses.js (the server's status sets), store.js, devices.js,
// tasks.js, card.js, approvals.js, compose.js, phones.js; this one wires them up.

import { call, readEvents, takeSessionFromAddress } from "./api.js";
import { postTask } from "./compose.js";
import { renderDevices } from "./devices.js";
import { noticeApprovals, renderPhones, setUpPhones, showRole, startPairing } from "./phones.js";
import { setConnection } from "./render.js";
import { learnStatuses } from "./statuses.js";
import { devices, tasks } from "./store.js";
import { applyThreadView, renderTask, renderTasks } from "./tasks.js";

const RECONNECT_MS = 3000;  // after the server went away (a restart): try again this often

// The whole state, first on every connection: what is shown already is updated in place.
function onSnapshot(data) {
  learnStatuses(data.statuses);
  devices.clear(); tasks.clear();
  for (const d of data.devices) devices.set(d.deviceId, d);
  for (const t of data.tasks) tasks.set(t.taskId, t);
  renderDevices();
  renderTasks(data.tasks);
}

async function connect() {
  const status = await readEvents("/api/local/events", {
    open: () => { setConnection("live", "live"); showRole(); },
    snapshot: (data) => { onSnapshot(data); noticeApprovals(); },
    device: (d) => { devices.set(d.deviceId, d); renderDevices(); },
    task: (t) => { tasks.set(t.taskId, t); renderTask(t); noticeApprovals(); },
    phones: (data) => renderPhones(data.phones),  // sent to the owner's page only
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

function setUpSubmit() {
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
}

function setUpPairingCode() {
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
}

function setUpThreadView() {
  document.querySelector("#thread-bar button").addEventListener("click", () => {
    history.replaceState(null, "", location.pathname);
    applyThreadView();
  });
  window.addEventListener("hashchange", applyThreadView);
  applyThreadView();
}

// A module runs once the document is parsed: no DOMContentLoaded to wait for.
takeSessionFromAddress();
setUpSubmit();
setUpPairingCode();
setUpThreadView();
setUpPhones();
if (!startPairing(connect)) connect();  // a phone with a #pair= code pairs first
