"""The device API, v1 (docs/device-api.md): the server side of every endpoint.

Handlers validate the body (a wrong type is a 400, never a 500), authenticate the
device by its bearer token (401 ``invalid_token`` for an unknown or revoked one),
check that ``deviceId`` in the body is the token's device, and call ``Core``.
``User-Agent`` is not required.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from boss_agent.controlplane.approval_store import WITHDRAW_REASONS
from boss_agent.controlplane.core import Core
from boss_agent.controlplane.db import dumps
from boss_agent.controlplane.wire import (
    MAX_SHORT_STR,
    MAX_SLOTS,
    bad_request,
    json_body,
    need_choice,
    need_dict,
    need_int,
    need_str,
    need_str_list,
    wait_seconds,
)
from boss_agent.errors import ControlPlaneError
from boss_agent.lifecycles import TERMINAL, TaskStatus

# An idle device has nothing to cancel: the contract's 15 s spares it wake-ups. While it
# runs a task, a cancel of a task that waits on an approval reaches the device only
# through a heartbeat (the approval poll carries no cancel), so then 5 s. The device
# beats at once when its running tasks change, so it switches without delay.
HEARTBEAT_INTERVAL_MS = 15_000
BUSY_HEARTBEAT_INTERVAL_MS = 5_000
DEFAULT_CLAIM_WAIT_MS = 25_000
DEFAULT_APPROVAL_WAIT_MS = 25_000
STATES = ("idle", "busy", "draining")
STATUSES = tuple(s.value for s in TaskStatus if s in TERMINAL)  # what `complete` may say
BACKENDS = ("app_server", "exec", "cua")
APPROVAL_KINDS = ("command", "fileChange", "permissions", "userInput", "elicitation", "tool")
ELICITATION_MODES = ("form", "url")
MAX_REASON_CHARS = 200  # device API §6: Codex's stated reason, sanitized and short
MAX_EXTRA_JSON_CHARS = 20_000  # questions, a form schema: a phone shows a handful of fields
# §6 detail: a command is shown whole up to 16 KiB; as JSON its escapes and newlines can
# double that, and a patch or a permission lists every path.
MAX_DETAIL_JSON_CHARS = 80_000
RISKS = ("low", "medium", "high")
MAX_SEQ = 2**53  # JSON numbers beyond this lose precision in JavaScript clients

CORE_KEY: web.AppKey[Core] = web.AppKey("core", Core)
routes = web.RouteTableDef()


def _device(request: web.Request, body: dict[str, Any] | None = None) -> str:
    auth = request.headers.get("Authorization", "")
    token = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
    device_id = request.app[CORE_KEY].devices.authenticate(token) if token else None
    if device_id is None:
        raise ControlPlaneError(401, "invalid_token", "the device token is unknown or revoked")
    if body is not None and body.get("deviceId") not in (None, device_id):
        raise ControlPlaneError(403, "device_mismatch", "deviceId is not the device of this token")
    return device_id


@routes.post("/api/v1/devices/pair")
async def pair(request: web.Request) -> web.Response:
    body = await json_body(request)
    code = need_str(body, "pairingCode", limit=64)
    for key in ("deviceName", "hostname", "platform", "arch", "agentVersion"):
        need_str(body, key, optional=True, limit=256)
    device_id, token = request.app[CORE_KEY].pair(code, body, request.remote or "")
    return web.json_response(
        {"deviceId": device_id, "deviceToken": token, "heartbeatIntervalMs": HEARTBEAT_INTERVAL_MS}, status=201
    )


@routes.post("/api/v1/devices/heartbeat")
async def heartbeat(request: web.Request) -> web.Response:
    body = await json_body(request)
    device_id = _device(request, body)
    need_choice(body, "state", STATES, optional=True)
    need_str_list(body, "runningTaskIds", optional=True)
    need_dict(body, "capabilities", optional=True)
    need_dict(body, "system", optional=True)
    if body.get("maxConcurrentTasks") is not None:
        need_int(body, "maxConcurrentTasks", 0, MAX_SLOTS)
    cancel_ids = request.app[CORE_KEY].heartbeat(device_id, body)
    busy = bool(body.get("runningTaskIds")) or bool(cancel_ids)
    interval = BUSY_HEARTBEAT_INTERVAL_MS if busy else HEARTBEAT_INTERVAL_MS
    return web.json_response({"heartbeatIntervalMs": interval, "cancelTaskIds": cancel_ids})


@routes.post("/api/v1/master-agent/tasks/claim")
async def claim(request: web.Request) -> web.Response:
    body = await json_body(request)
    device_id = _device(request, body)
    slots = need_int(body, "slots", 0, MAX_SLOTS, default=1)
    wait_s = wait_seconds(body.get("waitMs"), DEFAULT_CLAIM_WAIT_MS)
    # slots 0 still claims: steer tasks take no slot (device API §3).
    tasks = await request.app[CORE_KEY].claim(device_id, slots, wait_s)
    return web.json_response({"tasks": tasks})


@routes.post("/api/v1/master-agent/tasks/{taskId}/progress")
async def progress(request: web.Request) -> web.Response:
    body = await json_body(request)
    device_id = _device(request, body)
    seq = need_int(body, "seq", 0, MAX_SEQ)
    card = need_dict(body, "executionProgress")
    refs = {key: value for key in ("codexThreadRef", "turnId")
            if (value := need_str(body, key, optional=True))}
    cancel = request.app[CORE_KEY].progress(device_id, request.match_info["taskId"], seq, card, refs or None)
    return web.json_response({"cancelRequested": cancel})


def _check_complete(body: dict[str, Any]) -> None:
    need_choice(body, "status", STATUSES)
    need_choice(body, "backend", BACKENDS, optional=True)
    need_choice(body, "fallbackFrom", BACKENDS, optional=True)
    for key in ("codexThreadRef", "turnId"):
        need_str(body, key, optional=True)
    if body.get("resultText") is not None and not isinstance(body["resultText"], str):
        raise bad_request("resultText must be a string or null")
    error = need_dict(body, "error", optional=True)
    if error is not None:
        need_str(error, "code", limit=200)
        need_str(error, "message", optional=True)
    need_dict(body, "executionProgress", optional=True)


@routes.post("/api/v1/master-agent/tasks/{taskId}/complete")
async def complete(request: web.Request) -> web.Response:
    body = await json_body(request)
    device_id = _device(request, body)
    _check_complete(body)
    request.app[CORE_KEY].complete(device_id, request.match_info["taskId"], body)
    return web.json_response({})


def _summary(body: dict[str, Any]) -> str:
    summary = body.get("summary")
    if summary is None:
        return ""
    if not isinstance(summary, str) or len(summary) > MAX_SHORT_STR:
        raise bad_request(f"summary must be a string of at most {MAX_SHORT_STR} characters")
    return summary


@routes.post("/api/v1/master-agent/tasks/{taskId}/approvals")
async def create_approval(request: web.Request) -> web.Response:
    body = await json_body(request)
    device_id = _device(request, body)
    approval = {
        "approvalId": need_str(body, "approvalId", limit=200),
        "kind": need_choice(body, "kind", APPROVAL_KINDS),
        "summary": _summary(body),
        "risk": need_choice(body, "risk", RISKS, optional=True),
        "availableDecisions": need_str_list(body, "availableDecisions", optional=True) or ["accept", "decline"],
    }
    approval.update(_kind_fields(body))
    request.app[CORE_KEY].create_approval(device_id, request.match_info["taskId"], approval)
    return web.json_response({}, status=201)


def _kind_fields(body: dict[str, Any]) -> dict[str, Any]:
    """The optional fields of §6 by kind; the device has already sanitized them."""
    out: dict[str, Any] = {}
    reason = need_str(body, "reason", optional=True, limit=MAX_REASON_CHARS)
    if reason:
        out["reason"] = reason
    for key in ("questions", "permissions"):
        if isinstance(body.get(key), list):
            out[key] = body[key]
    if body.get("kind") == "elicitation":
        out["message"] = need_str(body, "message", optional=True, limit=MAX_SHORT_STR) or ""
        out["mode"] = need_choice(body, "mode", ELICITATION_MODES, optional=True) or "form"
        if isinstance(body.get("schema"), dict):
            out["schema"] = body["schema"]
        url = need_str(body, "url", optional=True, limit=MAX_SHORT_STR)
        if url:
            out["url"] = url
    if len(dumps(out)) > MAX_EXTRA_JSON_CHARS:
        raise bad_request("the approval's questions, permissions or schema are too large")
    if isinstance(body.get("detail"), dict):
        if len(dumps(body["detail"])) > MAX_DETAIL_JSON_CHARS:
            raise bad_request("the approval's detail is too large")
        out["detail"] = body["detail"]
    return out


@routes.post("/api/v1/master-agent/tasks/{taskId}/approvals/{approvalId}/withdraw")
async def withdraw_approval(request: web.Request) -> web.Response:
    body = await json_body(request)
    device_id = _device(request, body)
    reason = need_choice(body, "reason", WITHDRAW_REASONS)
    request.app[CORE_KEY].withdraw_approval(device_id, request.match_info["taskId"],
                                            request.match_info["approvalId"], reason)
    return web.json_response({})


@routes.get("/api/v1/master-agent/tasks/{taskId}/approvals/{approvalId}")
async def poll_approval(request: web.Request) -> web.Response:
    device_id = _device(request)
    wait_s = wait_seconds(request.query.get("waitMs"), DEFAULT_APPROVAL_WAIT_MS)
    answer = await request.app[CORE_KEY].wait_approval(
        device_id, request.match_info["taskId"], request.match_info["approvalId"], wait_s
    )
    return web.json_response(answer)
