"""The device API v1, server side: every endpoint and its error paths, over real HTTP."""

from __future__ import annotations

import asyncio
import sqlite3

import httpx

from boss_agent.controlplane import ControlPlane
from boss_agent.controlplane.api import BUSY_HEARTBEAT_INTERVAL_MS, HEARTBEAT_INTERVAL_MS

from tests.support.controlplane import FakeClock, error_code, pair
from tests.support.waits import within

TASK_KEYS = {
    "taskId", "attempt", "intentCategory", "prompt", "projectId", "workdir", "codexThreadRef",
    "sourceCodexThreadRef", "targetCodexThreadRef", "targetCodexTurnId", "model", "approvalMode",
    "approvalPolicy", "sandbox", "collaborationMode", "createdAt",
}


async def test_pairing_hands_out_a_token_that_is_stored_only_as_its_hash(http, plane, db_path):
    device = await pair(http, plane)
    assert device.device_id.startswith("dev_") and len(device.token) >= 32
    dump = "\n".join(sqlite3.connect(db_path).iterdump())
    assert device.token not in dump
    import hashlib
    assert hashlib.sha256(device.token.encode()).hexdigest() in dump
    assert (await device.heartbeat()).status_code == 200


async def test_an_unknown_or_reused_pairing_code_is_400_and_an_expired_one_is_410(http, plane, clock):
    body = {"deviceName": "x", "platform": "linux"}
    response = await http.post("/api/v1/devices/pair", json={"pairingCode": "000-000", **body})
    assert response.status_code == 400 and error_code(response) == "invalid_pairing_code"
    code = plane.create_pairing_code()
    assert (await http.post("/api/v1/devices/pair", json={"pairingCode": code, **body})).status_code == 201
    reused = await http.post("/api/v1/devices/pair", json={"pairingCode": code, **body})
    assert reused.status_code == 400 and error_code(reused) == "invalid_pairing_code"
    stale = plane.create_pairing_code(ttl_s=60)
    clock.advance(61)
    expired = await http.post("/api/v1/devices/pair", json={"pairingCode": stale, **body})
    assert expired.status_code == 410 and error_code(expired) == "pairing_code_expired"


async def test_ten_wrong_pairing_codes_lock_out_that_client_but_void_no_code(http, plane):
    code = plane.create_pairing_code()
    guesses = [f"{n:06d}" for n in range(20) if f"{n:06d}" != code.replace("-", "")][:10]
    for guess in guesses:
        assert (await http.post("/api/v1/devices/pair", json={"pairingCode": guess})).status_code == 400
    refused = await http.post("/api/v1/devices/pair", json={"pairingCode": code})
    assert refused.status_code == 429 and error_code(refused) == "too_many_attempts"
    other = httpx.AsyncHTTPTransport(local_address="127.0.0.2")  # another client: its code still works
    async with httpx.AsyncClient(base_url=plane.url, transport=other) as owner:
        assert (await owner.post("/api/v1/devices/pair", json={"pairingCode": code})).status_code == 201


async def test_an_unexpected_failure_is_a_500_with_the_contract_error_body(http, plane):
    device = await pair(http, plane)
    plane.core.db.conn.close()  # the database vanishes under a running server
    response = await device.heartbeat()
    assert response.status_code == 500 and error_code(response) == "internal_error"
    assert "Traceback" not in response.text


async def test_an_idle_device_is_asked_for_the_contract_interval_and_a_busy_one_for_a_short_one(http, plane):
    """Nothing to cancel on an idle device: 15 s (the contract's value) spares it wake-ups.
    A device running a task beats every 5 s, so a cancel of a task that waits on an
    approval (which only a heartbeat carries) reaches it soon."""
    device = await pair(http, plane)
    assert HEARTBEAT_INTERVAL_MS == 15_000 and BUSY_HEARTBEAT_INTERVAL_MS == 5_000
    assert (await device.heartbeat(runningTaskIds=[])).json()["heartbeatIntervalMs"] == 15_000
    assert (await device.heartbeat(runningTaskIds=["tsk_1"])).json()["heartbeatIntervalMs"] == 5_000
    assert (await device.heartbeat()).json()["heartbeatIntervalMs"] == 15_000


async def test_a_heartbeat_is_stored_with_its_capabilities_and_shown_to_the_page(http, plane, local):
    device = await pair(http, plane)
    capabilities = {"codexAppServer": {"available": True, "version": "0.171.0", "transport": "stdio"}}
    response = await device.heartbeat(capabilities=capabilities, runningTaskIds=[], maxConcurrentTasks=2,
                                      system={"os": "linux", "cpuCount": 2})
    assert response.json() == {"heartbeatIntervalMs": HEARTBEAT_INTERVAL_MS, "cancelTaskIds": []}
    [shown] = (await local.get("/api/local/devices")).json()["devices"]
    assert shown["deviceId"] == device.device_id and shown["deviceName"] == "kris-mbp"
    assert shown["capabilities"] == capabilities and shown["lastHeartbeatAt"] and shown["state"] == "idle"


async def test_a_claim_hands_out_the_contracts_task_object_once(http, plane):
    device = await pair(http, plane)
    task_id = plane.submit_task("Fix the failing test", workdir="/src/app", approvalMode="deny")
    [task] = await device.claim(slots=2)
    assert set(task) == TASK_KEYS
    assert task["taskId"] == task_id and task["attempt"] == 1 and task["prompt"] == "Fix the failing test"
    assert task["workdir"] == "/src/app" and task["approvalMode"] == "deny"
    assert task["intentCategory"] == "conversation_reply" and task["codexThreadRef"] is None
    assert await device.claim() == []
    assert plane.task(task_id)["status"] == "running" and plane.task(task_id)["deviceId"] == device.device_id


async def test_a_parked_claim_is_woken_by_a_submit(http, plane):
    device = await pair(http, plane)
    async with asyncio.TaskGroup() as group:
        parked = plane.core.claim_parked.current()
        claim = group.create_task(device.claim(wait_ms=30_000))
        await within(parked.wait())
        task_id = plane.submit_task("hello")
        # The bound is far below waitMs: only the wake-up can answer in time.
        tasks = await within(claim)
    assert [t["taskId"] for t in tasks] == [task_id]


async def test_progress_keeps_the_card_of_the_highest_seq(http, plane):
    device = await pair(http, plane)
    task_id = plane.submit_task("hello")
    await device.claim()
    for seq, status in ((2, "running"), (1, "queued"), (3, "waitingApproval"), (3, "stale")):
        response = await device.progress(task_id, seq, {"version": 1, "status": status})
        assert response.status_code == 200 and response.json() == {"cancelRequested": False}
    view = plane.task(task_id)
    assert view["seq"] == 3 and view["executionProgress"]["status"] == "waitingApproval"


async def test_a_cancel_reaches_the_device_through_heartbeat_and_progress(http, plane, local):
    device = await pair(http, plane)
    task_id = plane.submit_task("hello")
    await device.claim()
    assert (await local.post(f"/api/local/tasks/{task_id}/cancel")).json() == {"status": "running"}
    assert (await device.heartbeat(runningTaskIds=[task_id])).json()["cancelTaskIds"] == [task_id]
    assert (await device.progress(task_id, 1, {"status": "running"})).json() == {"cancelRequested": True}
    assert (await device.complete(task_id, "cancelled")).status_code == 200
    assert plane.task(task_id)["status"] == "cancelled"
    assert (await device.heartbeat()).json()["cancelTaskIds"] == []


async def test_complete_is_idempotent_and_the_first_result_wins(http, plane):
    device = await pair(http, plane)
    task_id = plane.submit_task("hello")
    await device.claim()
    card = {"version": 1, "status": "completed", "answerPreview": "42"}
    first = await device.complete(task_id, resultText="42", executionProgress=card, codexThreadRef="thr")
    again = await device.complete(task_id, "failed", resultText="other", error={"code": "x", "message": "y"})
    assert first.status_code == again.status_code == 200 and first.json() == {}
    view = plane.task(task_id)
    assert view["status"] == "completed" and view["result"]["resultText"] == "42"
    assert view["executionProgress"] == card and view["completedAt"]
    late = await device.progress(task_id, 9, {"status": "running"})
    assert late.status_code == 409 and error_code(late) == "task_not_owned"


async def test_calls_on_unknown_or_foreign_tasks_are_404_and_409(http, plane):
    owner, other = await pair(http, plane, "a"), await pair(http, plane, "b")
    task_id = plane.submit_task("hello")
    await owner.claim()
    unknown = await owner.progress("tsk_nope", 1, {})
    assert unknown.status_code == 404 and error_code(unknown) == "task_not_found"
    assert (await owner.complete("tsk_nope")).status_code == 404
    for response in (await other.progress(task_id, 1, {}), await other.complete(task_id),
                     await other.ask(task_id, "apr_1"), await other.poll(task_id, "apr_1")):
        assert response.status_code == 409 and error_code(response) == "task_not_owned"


async def test_an_approval_is_created_once_and_its_long_poll_is_answered_by_the_local_decision(
        http, plane, local):
    device = await pair(http, plane)
    task_id = plane.submit_task("hello")
    await device.claim()
    assert (await device.ask(task_id, "apr_1")).status_code == 201
    assert (await device.ask(task_id, "apr_1")).status_code == 201  # a retry, not a second approval
    assert [a["approvalId"] for a in plane.task(task_id)["approvals"]] == ["apr_1"]
    assert (await device.poll(task_id, "apr_1")).json() == {"status": "pending"}
    async with asyncio.TaskGroup() as group:
        decided = plane.core.approvals_changed.current()
        poll = group.create_task(device.poll(task_id, "apr_1", wait_ms=30_000))
        bad = await local.post(f"/api/local/approvals/{task_id}/apr_1", json={"decision": "maybe"})
        assert bad.status_code == 400 and error_code(bad) == "invalid_decision"
        ok = await local.post(f"/api/local/approvals/{task_id}/apr_1", json={"decision": "acceptForSession"})
        assert ok.status_code == 200
        await within(decided.wait())
        answer = await within(poll)
    assert answer.json() == {"status": "decided", "decision": "acceptForSession"}
    missing = await device.poll(task_id, "apr_nope")
    assert missing.status_code == 404 and error_code(missing) == "approval_not_found"


async def test_malformed_requests_get_4xx_with_the_contract_error_body(http, plane):
    device = await pair(http, plane)
    task_id = plane.submit_task("hello")
    await device.claim()
    raw = await http.post("/api/v1/devices/heartbeat", content=b"{not json", headers=device.headers)
    assert raw.status_code == 400 and error_code(raw) == "invalid_json"
    array = await http.post("/api/v1/devices/pair", json=["483-921"])
    assert array.status_code == 400 and error_code(array) == "invalid_json"
    cases = [
        ("/api/v1/master-agent/tasks/claim", {"slots": "two"}),
        ("/api/v1/master-agent/tasks/claim", {"waitMs": 10**9}),
        ("/api/v1/devices/heartbeat", {"state": "sleepy"}),
        ("/api/v1/devices/heartbeat", {"runningTaskIds": "tsk_1"}),
        (f"/api/v1/master-agent/tasks/{task_id}/progress", {"seq": -1, "executionProgress": {}}),
        (f"/api/v1/master-agent/tasks/{task_id}/progress", {"seq": True, "executionProgress": {}}),
        (f"/api/v1/master-agent/tasks/{task_id}/progress", {"seq": 1, "executionProgress": []}),
        (f"/api/v1/master-agent/tasks/{task_id}/complete", {"status": "done"}),
        (f"/api/v1/master-agent/tasks/{task_id}/complete", {"status": "failed", "error": "boom"}),
        (f"/api/v1/master-agent/tasks/{task_id}/approvals", {"approvalId": "a", "kind": "shell"}),
        (f"/api/v1/master-agent/tasks/{task_id}/approvals", {"approvalId": 7, "kind": "command"}),
    ]
    for path, body in cases:
        response = await device.post(path, body)
        assert response.status_code == 400 and error_code(response) == "invalid_request", (path, body)
    poll = await device.http.get(f"/api/v1/master-agent/tasks/{task_id}/approvals/a?waitMs=soon",
                                 headers=device.headers)
    assert poll.status_code == 400
    huge = await http.post("/api/v1/devices/heartbeat", content=b"[" + b" " * (9 * 1024 * 1024) + b"]",
                           headers=device.headers)
    assert huge.status_code == 413 and error_code(huge)
    missing = await http.get("/api/v1/nothing-here")
    assert missing.status_code == 404 and error_code(missing) == "not_found"
    wrong_method = await http.get("/api/v1/devices/pair")
    assert wrong_method.status_code == 405 and error_code(wrong_method) == "method_not_allowed"
    assert plane.task(task_id)["status"] == "running"  # nothing above broke the task


async def test_a_missing_bad_or_revoked_token_is_401(http, plane):
    device = await pair(http, plane)
    assert (await http.post("/api/v1/devices/heartbeat", json={})).status_code == 401
    bad = await http.post("/api/v1/devices/heartbeat", json={}, headers={"Authorization": "Bearer nope"})
    assert bad.status_code == 401 and error_code(bad) == "invalid_token"
    mismatch = await device.post("/api/v1/devices/heartbeat", {"deviceId": "dev_other"})
    assert mismatch.status_code == 403 and error_code(mismatch) == "device_mismatch"
    task_id = plane.submit_task("hello")
    await device.claim()
    plane.revoke_device(device.device_id)
    for response in (await device.heartbeat(), await device.post("/api/v1/master-agent/tasks/claim", {}),
                     await device.progress(task_id, 1, {}), await device.poll(task_id, "a")):
        assert response.status_code == 401 and error_code(response) == "invalid_token"
    assert plane.task(task_id)["status"] == "abandoned"  # a revoked device's work is visibly lost
    assert plane.devices()[0]["revoked"] is True


async def test_a_user_agent_header_is_not_required(http, plane):
    code = plane.create_pairing_code()
    bare = httpx.AsyncClient(base_url=plane.url, headers={"User-Agent": ""})
    async with bare:
        response = await bare.post("/api/v1/devices/pair", json={"pairingCode": code.replace("-", "")})
    assert response.status_code == 201


async def test_two_devices_claiming_at_once_never_share_a_task(http, plane):
    devices = [await pair(http, plane, "a"), await pair(http, plane, "b")]
    submitted = {plane.submit_task(f"task {i}") for i in range(20)}

    async def drain(device) -> list[str]:
        got: list[str] = []
        while batch := await device.claim(slots=3):
            got.extend(t["taskId"] for t in batch)
        return got

    results = await asyncio.gather(*(drain(d) for d in devices for _ in range(3)))
    claimed = [task_id for result in results for task_id in result]
    assert sorted(claimed) == sorted(submitted)  # every task once, none twice
    owners = {plane.task(t)["deviceId"] for t in submitted}
    assert owners <= {d.device_id for d in devices}


async def test_an_expired_lease_makes_the_task_visibly_abandoned(db_path, clock: FakeClock):
    async with ControlPlane(db_path, clock=clock, lease_s=1) as cp, httpx.AsyncClient(base_url=cp.url) as client:
        device = await pair(client, cp)
        kept, lost = cp.submit_task("kept"), cp.submit_task("lost")
        await device.claim(slots=2)
        async with cp.core.events.subscribe() as sub:
            clock.advance(0.8)
            await device.heartbeat(runningTaskIds=[kept])  # renews only the task it names
            clock.advance(0.8)
            while True:
                kind, view = await within(sub.queue.get())
                if kind == "task" and view["status"] == "abandoned":
                    break
        assert view["taskId"] == lost
        assert cp.task(kept)["status"] == "running"
        refused = await device.progress(lost, 1, {})
        assert refused.status_code == 409 and error_code(refused) == "task_not_owned"
        assert (await device.complete(lost, "failed", error={"code": "late", "message": "m"})).status_code == 200
        assert cp.task(lost)["status"] == "failed"  # the owner's late result is still recorded


async def test_wait_task_returns_once_the_condition_holds_without_polling(http, plane):
    device = await pair(http, plane)
    task_id = plane.submit_task("hello")
    async with asyncio.TaskGroup() as group:
        done = group.create_task(plane.wait_task(task_id, lambda v: v["status"] == "completed", timeout_s=10))
        pending = group.create_task(plane.wait_task(task_id, lambda v: bool(v["approvals"]), timeout_s=10))
        await device.claim()
        await device.ask(task_id, "apr_1")
        assert (await within(pending))["approvals"][0]["approvalId"] == "apr_1"
        assert not done.done()
        await device.complete(task_id)
        view = await within(done)
    assert view["status"] == "completed" and view["result"]["resultText"] == "done"


QUESTIONS = [{"id": "db_choice", "header": "Database", "question": "Which database should we use?",
              "options": [{"label": "Postgres", "description": "Robust default."}], "isSecret": False}]


async def test_a_user_input_approval_is_answered_with_codex_shaped_answers(http, plane, local):
    device = await pair(http, plane)
    task_id = plane.submit_task("hello")
    await device.claim()
    assert (await device.ask(task_id, "apr_cmd")).status_code == 201
    asked = await device.ask(task_id, "apr_ui", kind="userInput", summary="Which database?",
                             availableDecisions=["accept", "decline"], questions=QUESTIONS)
    assert asked.status_code == 201
    assert plane.task(task_id)["approvals"][1]["questions"] == QUESTIONS
    path = f"/api/local/approvals/{task_id}"
    answers = {"answers": {"db_choice": {"answers": ["Postgres"]}}}
    for approval_id, decision in (("apr_cmd", answers), ("apr_ui", {"answers": {"db_choice": "Postgres"}}),
                                  ("apr_ui", {"answers": {}, "extra": 1}), ("apr_ui", ["Postgres"])):
        refused = await local.post(f"{path}/{approval_id}", json={"decision": decision})
        assert refused.status_code == 400 and error_code(refused) in ("invalid_decision", "invalid_request")
    assert (await local.post(f"{path}/apr_ui", json={"decision": answers})).status_code == 200
    assert (await local.post(f"{path}/apr_ui", json={"decision": answers})).status_code == 200  # same: no-op
    other = await local.post(f"{path}/apr_ui", json={"decision": "decline"})
    assert other.status_code == 409 and error_code(other) == "approval_already_decided"
    # the device gets the contract's shape (§6): answers by question id, beside "accept"
    assert (await device.poll(task_id, "apr_ui")).json() == {
        "status": "decided", "decision": "accept", "answers": {"db_choice": ["Postgres"]}}
    await device.complete(task_id)
    late = await local.post(f"{path}/apr_cmd", json={"decision": "accept"})
    assert late.status_code == 409 and error_code(late) == "task_finished"


async def test_a_progress_upload_and_a_heartbeat_are_one_commit_each(http, plane):
    """Each commit is an fsync on the event loop's thread, which the daemon shares under
    `boss-agent up`: a card and its lease renewal, a beat and the leases it renews, are
    one transaction each (they were one commit per statement)."""
    device = await pair(http, plane)
    running = [plane.submit_task(f"task {i}") for i in range(2)]
    assert [t["taskId"] for t in await device.claim(slots=2)] == running
    statements: list[str] = []
    plane.core.db.conn.set_trace_callback(statements.append)
    try:
        assert (await device.progress(running[0], 1, {"status": "running"})).status_code == 200
        assert (await device.heartbeat(runningTaskIds=running)).status_code == 200
    finally:
        plane.core.db.conn.set_trace_callback(None)
    writes = [s.split()[0].upper() for s in statements
              if s.split()[0].upper() in ("BEGIN", "COMMIT", "UPDATE", "INSERT", "DELETE")]
    assert writes == ["BEGIN", "UPDATE", "UPDATE", "COMMIT",  # the card, its lease
                      "BEGIN", "UPDATE", "UPDATE", "UPDATE", "COMMIT"], statements  # the beat, two leases
