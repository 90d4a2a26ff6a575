"""The local (non-device) API: what the web page and `boss-agent task` call.

All of it needs the installation secret (see ``security.py``). Bodies and errors
follow the device API's conventions (camelCase JSON, ``{"error": {code, message}}``).

    GET  /api/health                                  {"ok": true}  (no secret: a liveness probe)
    GET  /api/local/state                             {"devices": [Device], "tasks": [TaskView],
                                                      "statuses": {set name: [status]}}  (the sets
                                                      the page acts on: see ``status_sets``)
    GET  /api/local/devices                           {"devices": [Device]}
    POST /api/local/devices/{deviceId}/revoke         {}
    POST /api/local/pairing-codes   {"ttlS"?}         201 {"pairingCode": "483-921", "expiresInS": 600}
    POST /api/local/tasks   {"prompt", Task fields…}  201 {"taskId"}
    GET  /api/local/tasks                             {"tasks": [TaskView]}  (newest first)
    GET  /api/local/tasks/{taskId}                    TaskView
    POST /api/local/tasks/{taskId}/cancel             {"status"}  (queued: cancelled now; running: asks the device)
    POST /api/local/tasks/{taskId}/retry              {}  (abandoned or failed → queued, attempt + 1)
    POST /api/local/approvals/{taskId}/{approvalId}  {"decision"}   {}  (a string; for userInput
                                                      {"answers": {qid: [text]}}; for an elicitation
                                                      form "accept" with {"content": {…}} beside it)
    GET  /api/local/events                            text/event-stream: ``snapshot`` first (as
                                                      /api/local/state), then ``task`` (a TaskView) and
                                                      ``device`` (a Device) on every change
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from boss_agent import lifecycles
from boss_agent.controlplane import queue
from boss_agent.controlplane.api import CORE_KEY
from boss_agent.controlplane.devices import PAIRING_CODE_TTL_S
from boss_agent.controlplane.security import principal
from boss_agent.controlplane.wire import bad_request, json_body, need_int, need_str
from boss_agent.tasks import MAX_PROMPT_CHARS

SSE_KEEPALIVE_S = 15.0  # a comment line this often keeps idle proxies and browsers from timing out
MAX_PAIRING_TTL_S = 86_400

routes = web.RouteTableDef()


@routes.get("/api/health")
async def health(request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


def status_sets() -> dict[str, list[str]]:
    """The status sets the page acts on, read where they are defined (it keeps no copy)."""
    return {"live": [lifecycles.TaskStatus.RUNNING],  # a device holds it: answered, steered, cancelled there
            "terminal": sorted(lifecycles.TERMINAL), "waiting": sorted(lifecycles.WAITING),
            "finished": sorted(queue.FINISHED), "retryable": sorted(queue.RETRYABLE)}


def snapshot(request: web.Request) -> dict[str, Any]:
    return {**request.app[CORE_KEY].snapshot(), "statuses": status_sets()}


@routes.get("/api/local/state")
async def state(request: web.Request) -> web.Response:
    return web.json_response(snapshot(request))


@routes.get("/api/local/devices")
async def devices(request: web.Request) -> web.Response:
    return web.json_response({"devices": request.app[CORE_KEY].devices.devices()})


@routes.post("/api/local/devices/{deviceId}/revoke")
async def revoke(request: web.Request) -> web.Response:
    request.app[CORE_KEY].revoke_device(request.match_info["deviceId"])
    return web.json_response({})


@routes.post("/api/local/pairing-codes")
async def pairing_code(request: web.Request) -> web.Response:
    body = await json_body(request) if request.can_read_body else {}
    ttl_s = need_int(body, "ttlS", 1, MAX_PAIRING_TTL_S, default=PAIRING_CODE_TTL_S)
    code = request.app[CORE_KEY].create_pairing_code(ttl_s)
    return web.json_response({"pairingCode": code, "expiresInS": ttl_s}, status=201)


@routes.post("/api/local/tasks")
async def submit(request: web.Request) -> web.Response:
    body = await json_body(request)
    prompt = need_str(body, "prompt", limit=MAX_PROMPT_CHARS)
    unknown = sorted(set(body) - {"prompt", *queue.TASK_FIELDS})
    if unknown:
        raise bad_request(f"unknown task field {unknown[0]!r}", "invalid_task")
    fields = {key: value for key, value in body.items() if key != "prompt" and value not in (None, "")}
    task_id = request.app[CORE_KEY].submit_task(prompt, fields)
    return web.json_response({"taskId": task_id}, status=201)


@routes.get("/api/local/tasks")
async def tasks(request: web.Request) -> web.Response:
    return web.json_response({"tasks": request.app[CORE_KEY].queue.tasks()})


@routes.get("/api/local/tasks/{taskId}")
async def task(request: web.Request) -> web.Response:
    return web.json_response(request.app[CORE_KEY].queue.task(request.match_info["taskId"]))


@routes.post("/api/local/tasks/{taskId}/cancel")
async def cancel(request: web.Request) -> web.Response:
    status = request.app[CORE_KEY].cancel_task(request.match_info["taskId"])
    return web.json_response({"status": status})


@routes.post("/api/local/tasks/{taskId}/retry")
async def retry(request: web.Request) -> web.Response:
    request.app[CORE_KEY].retry_task(request.match_info["taskId"])
    return web.json_response({})


@routes.post("/api/local/approvals/{taskId}/{approvalId}")
async def decide(request: web.Request) -> web.Response:
    body = await json_body(request)
    decision = body.get("decision")
    if not isinstance(decision, dict):  # answers to a userInput request are an object
        decision = need_str(body, "decision", limit=64)
        if "content" in body:  # an MCP elicitation form, accepted with what the person filled in
            decision = {"decision": decision, "content": body["content"]}
    request.app[CORE_KEY].decide(request.match_info["taskId"], request.match_info["approvalId"], decision)
    return web.json_response({})


def _frame(kind: str, payload: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n".encode()


@routes.get("/api/local/events")
async def events(request: web.Request) -> web.StreamResponse:
    core = request.app[CORE_KEY]
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "X-Accel-Buffering": "no"})
    await response.prepare(request)
    try:
        # Subscribe before the snapshot: a change in between arrives as an event after it.
        who = principal(request)
        async with core.events.subscribe(who.phone_id if who else None) as sub:
            if core.closing.is_set():
                return response
            await response.write(_frame("snapshot", snapshot(request)))
            while True:
                try:
                    async with asyncio.timeout(SSE_KEEPALIVE_S):
                        item = await sub.queue.get()
                except TimeoutError:
                    await response.write(b": keepalive\n\n")
                    continue
                if item is None:
                    return response
                await response.write(_frame(*item))
    except ConnectionResetError:
        return response  # the page went away
