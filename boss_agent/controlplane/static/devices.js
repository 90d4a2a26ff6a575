// The paired devices: one keyed element each, with what its last heartbeat said.

import { act, el, reconcile, when } from "./render.js";
import { devices } from "./store.js";

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

function deviceNode(device) {
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
  return node;
}

// Every device the store holds, in the order it was first seen.
export function renderDevices() {
  reconcile(document.getElementById("devices"),
    [...devices.values()].map((d) => ({ key: d.deviceId, make: () => deviceNode(d) })));
  document.getElementById("no-devices").hidden = devices.size > 0;
}
