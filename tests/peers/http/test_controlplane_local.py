"""The local API, the page's doors (Host, Origin, secret) and the live event stream."""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path

import httpx
import pytest

from boss_agent.controlplane import ControlPlane, serve
from boss_agent.controlplane.security import secret_path
from boss_agent.controlplane.web import STATIC

pytest.register_assert_rewrite("tests.support.controlplane")  # before the import, for its asserts
from tests.support.controlplane import HTTP_TIMEOUT_S, error_code, pair
from tests.support.waits import within

pytest_plugins = ("tests.support.controlplane",)  # its fixtures: plane, http, local, clock, db_path


async def test_a_foreign_host_header_is_refused_everywhere(http, plane):
    headers = {"Authorization": f"Bearer {plane.secret}"}
    for path in ("/", "/api/local/tasks", "/api/v1/devices/pair", "/api/health"):
        response = await http.get(path, headers={"Host": "evil.example", **headers})
        assert response.status_code == 403 and error_code(response) == "forbidden_host", path
    rebound = await http.get("/api/health", headers={"Host": f"attacker.test:{httpx.URL(plane.url).port}"})
    assert rebound.status_code == 403
    for host in ("localhost", "127.0.0.1", "127.0.0.2", "[::1]"):
        ok = await http.get("/api/health", headers={"Host": f"{host}:{httpx.URL(plane.url).port}"})
        assert ok.status_code == 200 and ok.json() == {"ok": True}, host


async def test_a_state_changing_request_from_a_foreign_origin_is_refused(local, http, plane):
    for origin in ("http://evil.example", "null", f"http://localhost:{httpx.URL(plane.url).port}"):
        response = await local.post("/api/local/tasks", json={"prompt": "x"}, headers={"Origin": origin})
        assert response.status_code == 403 and error_code(response) == "forbidden_origin", origin
    device_call = await http.post("/api/v1/devices/pair", json={"pairingCode": "1"},
                                  headers={"Origin": "http://evil.example"})
    assert device_call.status_code == 403
    same = await local.post("/api/local/tasks", json={"prompt": "x"}, headers={"Origin": plane.url})
    assert same.status_code == 201
    assert plane.tasks()[0]["taskId"] == same.json()["taskId"] and len(plane.tasks()) == 1


async def test_the_local_api_needs_the_secret_and_a_cookie_is_never_enough(http, plane):
    for method, path in (("GET", "/api/local/state"),
                         ("POST", "/api/local/tasks"), ("POST", "/api/local/pairing-codes"),
                         ("GET", "/api/local/events"), ("POST", "/api/local/approvals/t/a")):
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Cookie": "boss_cp_1=wrong"}):
            response = await http.request(method, path, headers=headers, json={})
            assert response.status_code == 401 and error_code(response) == "unauthorized", (path, headers)
    assert plane.tasks() == []


async def test_the_token_door_hands_the_page_a_session_in_the_fragment_and_sets_no_cookie(http, plane):
    wrong = await http.get("/", params={"token": "guess"})
    assert wrong.status_code == 401 and "set-cookie" not in wrong.headers
    door = await http.get("/", params={"token": plane.secret})
    assert door.status_code == 303 and door.headers["location"].startswith("/#session=")
    assert "set-cookie" not in door.headers and plane.secret not in door.headers["location"]
    session = door.headers["location"].split("=", 1)[1]
    page = await http.get("/")  # the page itself holds no data: anyone may load it
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert 'id="submit-form"' in page.text and "http" not in page.text.split("<body", 1)[1].lower()
    assert page.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    modules = [p.name for p in STATIC.glob("*.js") if p.name != "sw.js"]  # a module script needs a JS type
    for asset, kind in (*((m, "text/javascript") for m in modules), ("style.css", "css")):
        response = await http.get(f"/static/{asset}")
        assert response.status_code == 200 and kind in response.headers["content-type"]
    assert (await http.get("/static/..%2Fserver.py")).status_code == 404
    assert (await http.get("/api/local/state")).status_code == 401
    assert (await http.get("/api/local/state", headers={"Authorization": f"Bearer {session}"})).status_code == 200


async def test_the_secret_is_created_once_owner_only_and_survives_a_restart(db_path):
    async with ControlPlane(db_path) as first:
        pass
    mode = stat.S_IMODE(secret_path(db_path).stat().st_mode)
    assert mode == 0o600 and stat.S_IMODE(db_path.stat().st_mode) == 0o600
    async with ControlPlane(db_path) as second:
        assert second.secret == first.secret
        assert second.page_url == f"{second.url}/?token={first.secret}"
        assert (db_path.parent / "controlplane.url").read_text().strip() == second.url
    assert not (db_path.parent / "controlplane.url").exists()


async def test_a_submitted_task_is_validated_and_readable(local, plane):
    created = await local.post("/api/local/tasks", json={
        "prompt": "Fix it", "workdir": "/src/app", "intentCategory": "dispatch_execution",
        "codexThreadRef": "thr_1", "sandbox": "read-only", "model": ""})
    assert created.status_code == 201
    view = (await local.get(f"/api/local/tasks/{created.json()['taskId']}")).json()
    assert view["status"] == "queued" and view["attempt"] == 1 and view["executionProgress"] is None
    assert view["task"]["codexThreadRef"] == "thr_1" and view["task"]["model"] is None
    bad = {
        "invalid_request": [{"workdir": "/x"}, {"prompt": 5}, {"prompt": ""}],
        "invalid_task": [{"prompt": "x", "thread": "t"}, {"prompt": "x", "approvalMode": "yolo"},
                         {"prompt": "x", "sandbox": "everything"}, {"prompt": "   "},
                         {"prompt": "x", "intentCategory": "thread_collaboration"}],
        "unsupported_intent": [{"prompt": "x", "intentCategory": "dance"}],
    }
    for code, bodies in bad.items():
        for body in bodies:
            response = await local.post("/api/local/tasks", json=body)
            assert response.status_code == 400 and error_code(response) == code, body
    unknown = await local.get("/api/local/tasks/tsk_nope")
    assert unknown.status_code == 404 and error_code(unknown) == "task_not_found"
    assert len((await local.get("/api/local/tasks")).json()["tasks"]) == 1


async def test_cancel_retry_and_pairing_codes_over_the_local_api(local, http, plane):
    queued = plane.submit_task("never runs")
    assert (await local.post(f"/api/local/tasks/{queued}/cancel")).json() == {"status": "cancelled"}
    again = await local.post(f"/api/local/tasks/{queued}/cancel")
    assert again.status_code == 409 and error_code(again) == "task_finished"
    issued = await local.post("/api/local/pairing-codes", json={"ttlS": 120})
    assert issued.status_code == 201 and issued.json()["expiresInS"] == 120
    code = issued.json()["pairingCode"]
    assert len(code) == 7 and code[3] == "-"
    paired = await http.post("/api/v1/devices/pair", json={"pairingCode": code})
    assert paired.status_code == 201
    device_id = paired.json()["deviceId"]
    token = {"Authorization": f"Bearer {paired.json()['deviceToken']}"}
    task_id = plane.submit_task("runs")
    claim = await http.post("/api/v1/master-agent/tasks/claim", json={"waitMs": 0}, headers=token)
    assert claim.json()["tasks"][0]["taskId"] == task_id
    assert (await local.post(f"/api/local/devices/{device_id}/revoke")).status_code == 200
    assert plane.task(task_id)["status"] == "abandoned"
    assert (await local.post(f"/api/local/tasks/{task_id}/retry")).status_code == 200
    view = plane.task(task_id)
    assert view["status"] == "queued" and view["attempt"] == 2 and view["deviceId"] is None
    not_retryable = await local.post(f"/api/local/tasks/{task_id}/retry")
    assert not_retryable.status_code == 409
    missing = await local.post("/api/local/devices/dev_nope/revoke")
    assert missing.status_code == 404 and error_code(missing) == "device_not_found"


async def _next_event(lines) -> tuple[str, dict]:
    kind = None
    async for line in lines:
        if line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: ") and kind:
            return kind, json.loads(line[6:])
    raise AssertionError("the event stream ended")


async def test_the_event_stream_starts_with_a_snapshot_then_follows_every_change(local, http, plane):
    device = await pair(http, plane)
    async with local.stream("GET", "/api/local/events") as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        lines = stream.aiter_lines()
        kind, snapshot = await within(_next_event(lines))
        assert kind == "snapshot" and [d["deviceId"] for d in snapshot["devices"]] == [device.device_id]
        task_id = plane.submit_task("watch me")
        kind, view = await within(_next_event(lines))
        assert (kind, view["taskId"], view["status"]) == ("task", task_id, "queued")
        await device.heartbeat(state="busy")
        kind, shown = await within(_next_event(lines))
        assert (kind, shown["state"]) == ("device", "busy")
        await device.claim()
        await device.progress(task_id, 1, {"version": 1, "status": "running", "answerPreview": "hi"})
        statuses = [(await within(_next_event(lines)))[1] for _ in range(2)]
        assert statuses[0]["status"] == "running" and statuses[1]["executionProgress"]["answerPreview"] == "hi"


async def test_leaving_the_control_plane_answers_parked_long_polls_at_once(db_path):
    async with ControlPlane(db_path) as cp, httpx.AsyncClient(base_url=cp.url, timeout=HTTP_TIMEOUT_S) as client:
        device = await pair(client, cp)
        async with asyncio.TaskGroup() as group:
            parked = cp.core.claim_parked.current()
            claim = group.create_task(device.claim(wait_ms=30_000))
            await within(parked.wait())
            await within(cp.__aexit__(None, None, None))
            assert await within(claim) == []


async def test_serve_runs_until_cancelled_and_reports_ready(tmp_path: Path):
    ready: asyncio.Future[ControlPlane] = asyncio.get_running_loop().create_future()
    async with asyncio.TaskGroup() as group:
        server = group.create_task(serve(tmp_path / "db.sqlite3", "127.0.0.1", 0, ready=ready.set_result))
        plane = await within(ready)
        async with httpx.AsyncClient() as client:
            assert (await client.get(f"{plane.url}/api/health")).json() == {"ok": True}
        server.cancel()
