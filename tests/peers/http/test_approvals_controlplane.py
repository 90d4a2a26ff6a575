"""The local control plane's approvals across retries, conflicts and withdrawals.

Real ControlPlane on loopback, real HTTP; the device is the tests' small client.
"""

from __future__ import annotations

import asyncio

import pytest

from boss_agent.sources.boss.api import BossApi
from boss_agent.sources.boss.remote_approvals import RemoteApprovals
from boss_agent.sources.boss.retry import BossApiRetry
from boss_agent.tasks import ApprovalRequest, parse_task

pytest.register_assert_rewrite("tests.support.controlplane")  # before the import, for its asserts
from tests.support.controlplane import error_code, pair  # noqa: E402
from tests.support.waits import within  # noqa: E402
pytest_plugins = ("tests.support.controlplane",)  # its fixtures: plane, http, local, clock, db_path


async def _fail_and_retry(device, plane, task_id: str) -> None:
    assert (await device.complete(task_id, status="failed")).status_code == 200
    plane.core.retry_task(task_id)
    (task,) = await device.claim()
    assert task["taskId"] == task_id and task["attempt"] == 2


async def test_a_retry_archives_the_earlier_attempts_approvals_and_never_reuses_a_decision(
        http, plane, local):
    device = await pair(http, plane)
    task_id = plane.submit_task("hello")
    await device.claim()
    assert (await device.ask(task_id, "apr_1")).status_code == 201
    decided = await local.post(f"/api/local/approvals/{task_id}/apr_1", json={"decision": "accept"})
    assert decided.status_code == 200
    await _fail_and_retry(device, plane, task_id)
    assert plane.task(task_id)["approvals"] == []  # attempt 2 starts with nothing decided
    # An old device that derives the same id again must not get attempt 1's "accept".
    again = await device.ask(task_id, "apr_1")
    assert again.status_code == 409 and error_code(again) == "approval_conflict"
    assert (await device.ask(task_id, "apr_2")).status_code == 201
    assert (await device.poll(task_id, "apr_2")).json() == {"status": "pending"}


async def test_an_id_recreated_with_a_different_request_is_a_conflict(http, plane):
    device = await pair(http, plane)
    task_id = plane.submit_task("hello")
    await device.claim()
    assert (await device.ask(task_id, "apr_1")).status_code == 201
    assert (await device.ask(task_id, "apr_1")).status_code == 201  # the same request again: a retry
    other = await device.ask(task_id, "apr_1", kind="fileChange", summary="Edit 2 files")
    assert other.status_code == 409 and error_code(other) == "approval_conflict"
    assert [a["kind"] for a in plane.task(task_id)["approvals"]] == ["command"]


async def test_a_withdrawn_approval_is_marked_so_and_a_decision_on_it_is_refused(http, plane, local):
    device = await pair(http, plane)
    task_id = plane.submit_task("hello")
    await device.claim()
    assert (await device.ask(task_id, "apr_1")).status_code == 201
    async with asyncio.TaskGroup() as group:
        poll = group.create_task(device.poll(task_id, "apr_1", wait_ms=30_000))
        withdrawn = await device.post(f"/api/v1/master-agent/tasks/{task_id}/approvals/apr_1/withdraw",
                                      {"reason": "resolved"})
        assert withdrawn.status_code == 200, withdrawn.text
        answer = await within(poll)
    assert answer.json()["status"] == "withdrawn"
    (approval,) = plane.task(task_id)["approvals"]
    assert approval["status"] == "withdrawn" and approval["withdrawReason"] == "resolved"
    late = await local.post(f"/api/local/approvals/{task_id}/apr_1", json={"decision": "accept"})
    assert late.status_code == 409 and error_code(late) == "approval_withdrawn"
    again = await device.post(f"/api/v1/master-agent/tasks/{task_id}/approvals/apr_1/withdraw",
                              {"reason": "turn_ended"})
    assert again.status_code == 200  # idempotent
    bad = await device.post(f"/api/v1/master-agent/tasks/{task_id}/approvals/apr_1/withdraw",
                            {"reason": "bored"})
    assert bad.status_code == 400


async def test_the_device_declines_when_its_approval_id_names_another_request(http, plane):
    device = await pair(http, plane)
    task_id = plane.submit_task("hello")
    (claimed,) = await device.claim()
    assert (await device.ask(task_id, "apr_1", kind="fileChange", summary="Edit 1 file")).status_code == 201
    await local_decide(plane, task_id, "apr_1", "accept")  # someone accepted that other request
    asked = ApprovalRequest("apr_1", "command", "Run pytest (network: no)", "low", ("accept", "decline"))
    async with BossApi(plane.url, device_id=device.device_id, token=device.token,
                       policy=BossApiRetry.fast()) as api:
        decision = await within(RemoteApprovals(api, timeout_s=30).request(
            parse_task(claimed), asked, asyncio.Event()))
    assert decision == "decline"  # never the other request's "accept"


async def local_decide(plane, task_id: str, approval_id: str, decision: str) -> None:
    plane.core.decide(task_id, approval_id, decision)


DETAIL = {"command": "/bin/bash -c 'ls && rm -rf victim1'", "cwd": ".", "outsideWorkspace": False,
          "sandbox": "workspace-write", "escalated": True, "network": True}


@pytest.mark.parametrize("end", ["decided", "withdrawn"])
async def test_the_detail_is_kept_while_pending_and_dropped_once_decided_or_withdrawn(
        http, plane, local, end: str):
    device = await pair(http, plane)
    task_id = plane.submit_task("hello")
    await device.claim()
    asked = await device.ask(task_id, "apr_1", kind="tool", risk="high", detail=DETAIL)
    assert asked.status_code == 201, asked.text
    (pending,) = plane.task(task_id)["approvals"]
    assert pending["detail"] == DETAIL and pending["kind"] == "tool"
    if end == "decided":
        decided = await local.post(f"/api/local/approvals/{task_id}/apr_1", json={"decision": "accept"})
        assert decided.status_code == 200
    else:
        assert (await device.post(f"/api/v1/master-agent/tasks/{task_id}/approvals/apr_1/withdraw",
                                  {"reason": "resolved"})).status_code == 200
    (closed,) = plane.task(task_id)["approvals"]
    assert "detail" not in closed and closed["summary"] == "Run the test suite"
    # A retried POST of the same request (its answer was lost) is still the same approval.
    again = await device.ask(task_id, "apr_1", kind="tool", risk="high", detail=DETAIL)
    assert again.status_code == 201, again.text
    assert "detail" not in plane.task(task_id)["approvals"][0]


def _commits(statements: list[str]) -> int:
    """Durable commits among traced statements: each BEGIN ... COMMIT once, and each write
    run outside one (autocommit) once; on WAL with synchronous=FULL each is an fsync."""
    commits, inside = 0, False
    for sql in (s.strip().upper() for s in statements):
        if sql.startswith("BEGIN"):
            inside = True
        elif sql.startswith(("COMMIT", "ROLLBACK")):
            inside, commits = False, commits + sql.startswith("COMMIT")
        elif not inside and sql.startswith(("INSERT", "UPDATE", "DELETE", "REPLACE")):
            commits += 1
    return commits


async def test_an_approval_round_trip_costs_one_commit_to_ask_and_none_to_read_the_decision(
        http, plane, local):
    """What the person waits for (bench row 12): each fsync is milliseconds on a real disk.
    The device's create is one commit (lease renewal and request together), and its poll
    that finds the decision writes nothing; a poll that waits still renews the lease."""
    device = await pair(http, plane)
    task_id = plane.submit_task("hello")
    await device.claim()
    traced: list[str] = []
    plane.core.db.conn.set_trace_callback(traced.append)
    try:
        assert (await device.ask(task_id, "apr_1")).status_code == 201
        asked = _commits(traced)
        traced.clear()
        assert (await device.poll(task_id, "apr_1")).json() == {"status": "pending"}
        pending_poll = _commits(traced)
        decided = await local.post(f"/api/local/approvals/{task_id}/apr_1", json={"decision": "accept"})
        assert decided.status_code == 200
        traced.clear()
        assert (await device.poll(task_id, "apr_1")).json()["status"] == "decided"
        decided_poll = _commits(traced)
    finally:
        plane.core.db.conn.set_trace_callback(None)
    assert (asked, pending_poll, decided_poll) == (1, 1, 0)
