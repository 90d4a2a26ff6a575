"""The embedded local Boss control plane (`boss-agent up` / `devserver`) and its web page.

A small Boss server on loopback: it pairs devices, queues tasks, leases them to
devices, collects their progress cards, results and approval requests, and shows
all of it live on a web page where the user submits tasks, approves and cancels.

Modules, by responsibility:
    server.py    ``ControlPlane`` (the runner) and ``serve``; the aiohttp app factory
    api.py       the device API v1, server side (docs/device-api.md)
    local.py     the local API for the page and `boss-agent task` (table there), SSE
    web.py       the page and its static files (``static/``)
    security.py  the credentials: installation secret, owner sessions, phones; the middleware
    origins.py   which way a request came in: loopback, a proxy's public origin, a direct listener
    phones.py    one-time phone codes and paired phones (hashed tokens, wrong-code limit)
    phone_api.py the phones' routes (codes, pair, list, revoke, whoami)
    tls.py       the phone listeners' certificate: the owner's or a self-signed one made once
    core.py      operations + their notifications (long-poll wake-ups, live events)
    queue.py     tasks and leases (the lifecycle is drawn there); who may touch approvals
    approval_store.py approval requests and decisions (incl. userInput answers)
    devices.py   pairing codes, devices, heartbeats
    events.py    long-poll signals and the SSE broadcaster
    db.py        SQLite connection and schema
    wire.py      JSON bodies, field checks, the error body, the error middleware
    client.py    ``LocalClient``: the local API from Python (for `boss-agent task`)

Python API::

    async with ControlPlane(db_path, host="127.0.0.1", port=0, secret=None, lease_s=LEASE_S) as cp:
        cp.url, cp.secret, cp.page_url
        cp.create_pairing_code(ttl_s=600) -> "483-921"
        cp.submit_task(prompt, **task_fields) -> taskId   # camelCase fields of device API §3
        cp.task(task_id) -> TaskView;  cp.tasks();  cp.devices()
        cp.cancel_task(task_id);  cp.decide(task_id, approval_id, decision);  cp.revoke_device(device_id)
        cp.create_phone_code() -> {url, code, fingerprint, expiresAt, qr};  cp.phones();  cp.revoke_phone(id)
        cp.listen_urls, cp.fingerprint     # with listen=("ADDRESS:PORT",), public_origins=(...)
        await cp.wait_task(task_id, condition, timeout_s=600) -> TaskView   # event-driven
    await serve(db_path, host, port, ready=callback)       # until cancelled

    async with LocalClient.for_db_dir(db_dir) as client:   # or LocalClient(url, secret)
        await client.submit(prompt, **fields) -> taskId;  await client.task(task_id)
        async for view in client.follow(task_id): ...      # until finished, over SSE
        await client.cancel(task_id);  await client.decide(task_id, approval_id, decision)
        await client.pairing_code(ttl_s=None)

Local HTTP API (``Authorization: Bearer`` with the secret or a page session on loopback,
or a phone's token, see ``security.py``; no cookie is enough on loopback)::

    GET  /api/health                                   {"ok": true}   (no secret needed)
    GET  /api/local/state                              {"devices": [...], "tasks": [...]}
    GET  /api/local/devices                            {"devices": [...]}
    POST /api/local/devices/{deviceId}/revoke          {}
    POST /api/local/pairing-codes    {"ttlS"?}         201 {"pairingCode", "expiresInS"}
    POST /api/local/tasks    {"prompt", fields...}     201 {"taskId"}
    GET  /api/local/tasks                              {"tasks": [...]}  newest first
    GET  /api/local/tasks/{taskId}                     TaskView
    POST /api/local/tasks/{taskId}/cancel              {"status"}
    POST /api/local/tasks/{taskId}/retry               {}
    POST /api/local/approvals/{taskId}/{approvalId}   {"decision"} -> {}   (a string; for userInput
                                                       {"answers": {qid: [text]}}; an MCP form adds
                                                       "content" beside "accept")
    GET  /api/local/events                             SSE: snapshot, then task / device events
    GET  /?token=<secret>                              303 to /#session=<session> (never the secret; loopback only)
    POST /api/local/phones/codes | /phones/pair | GET /api/local/phones | POST /phones/{id}/revoke
    GET  /api/local/whoami                             see ``phone_api.py``

TaskView: ``{taskId, status (queued|running|completed|failed|cancelled|abandoned),
attempt, deviceId, leaseExpiresAt, cancelRequested, seq, executionProgress, result
({status, backend, fallbackFrom, codexThreadRef, turnId, resultText, error}),
approvals ([{approvalId, kind, summary, risk, availableDecisions, status
(pending|decided|withdrawn), decision, withdrawReason?, reason?, questions?, permissions?,
message?, mode?, schema?, url?, createdAt, decidedAt}]: the current attempt's only),
createdAt, updatedAt, claimedAt, completedAt, codexThreadRef and turnId (the thread and
turn it runs on, live from progress uploads, then from the result: what Steer and
Continue send), waitReason (a queued task's reason for not starting while every slot of
the device is held, e.g. "2 tasks are waiting on your approval; this one starts when a slot
frees"; else null), task (the submitted Task fields with prompt)}``.
"""

from boss_agent.controlplane.client import LocalClient
from boss_agent.controlplane.server import LEASE_S, ControlPlane, serve

__all__ = ["LEASE_S", "ControlPlane", "LocalClient", "serve"]
