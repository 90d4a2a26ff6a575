"""The daemon's Boss source end to end against the real ControlPlane on loopback, with
a fault-injecting real HTTP proxy in between and the in-test StubRunner: pairing,
heartbeats, claim, progress, completion through 500s, malformed tasks, approvals,
cancel, a revoked token, a suspend, graceful stop."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from boss_agent.controlplane import ControlPlane
from boss_agent.errors import BossApiError
from boss_agent.identity import load_identity
from boss_agent.sources.boss.api import BossApi
from boss_agent.sources.boss.pairing import pair_device
from boss_agent.sources.boss.spool import RunningJournal
from boss_agent.tasks import Task, TaskResult, TaskSink
from boss_agent.daemon.statefile import STATE_FILE
from tests.support.config import make_config
from tests.support.daemon import FAST, WAIT_S, FaultProxy, StubRunner, finished, running, spool_empty
from tests.support.waits import eventually



@pytest.fixture
async def paired(tmp_path: Path, plane: ControlPlane, proxy: FaultProxy) -> Any:
    config = make_config(tmp_path, server_url=proxy.url, workspace=tmp_path, max_concurrent_tasks=2)
    identity = await pair_device(config.state_dir, proxy.url, plane.create_pairing_code(), policy=FAST)
    return plane, proxy, config, identity


async def test_pairing_stores_an_owner_only_token_and_bad_codes_are_one_line_errors(
    tmp_path: Path, plane: ControlPlane, proxy: FaultProxy,
) -> None:
    state = tmp_path / "state"
    with pytest.raises(BossApiError) as bad:
        await pair_device(state, proxy.url, "000-000", policy=FAST)
    assert bad.value.code == "invalid_pairing_code" and "\n" not in str(bad.value)
    identity = await pair_device(state, proxy.url, plane.create_pairing_code(), policy=FAST)
    assert load_identity(state) == identity
    assert stat.S_IMODE((state / "device_token").stat().st_mode) == 0o600
    assert identity.token not in repr(identity)


async def test_a_claimed_task_streams_progress_and_completes_with_its_result(paired: Any) -> None:
    cp, proxy, config, identity = paired
    runner = StubRunner(cards=50)
    async with running(config, runner) as daemon:
        await proxy.wait_for(lambda: proxy.requests("/heartbeat"))
        task_id = cp.submit_task("say hi")
        view = await finished(cp, proxy, task_id)
        assert view["result"]["status"] == "completed"
        assert view["result"]["resultText"] == "done: say hi"
        assert view["result"]["codexThreadRef"] == "thr_stub"
        assert view["result"]["backend"] == "app_server"
        uploads = [s.body for s in proxy.requests(f"/{task_id}/progress")]
        assert 1 <= len(uploads) < 51  # coalesced, 51 cards
        assert [u["seq"] for u in uploads] == list(range(1, len(uploads) + 1))
        assert view["executionProgress"]["status"] == "completed"
        beat = cp.devices()[0]
        assert beat["capabilities"]["codexExec"] == {"available": True, "version": "test"}
        assert beat["system"]["cpuCount"] >= 1
        await spool_empty(daemon)
    state = json.loads((config.state_dir / STATE_FILE).read_text())
    assert state["paired"] is True and state["device_id"] == identity.device_id
    assert identity.token not in (config.state_dir / STATE_FILE).read_text()


async def test_completes_survive_a_server_answering_500_for_a_while(paired: Any) -> None:
    cp, proxy, config, _ = paired
    proxy.fail("/complete", 4, 500)
    async with running(config, StubRunner(cards=1)) as daemon:
        task_id = cp.submit_task("keep me")
        view = await finished(cp, proxy, task_id)
        assert view["result"]["resultText"] == "done: keep me"
        statuses = [s.status for s in proxy.requests(f"/{task_id}/complete")]
        assert statuses[:4] == [500] * 4 and statuses[-1] == 200
        await spool_empty(daemon)


async def test_a_failing_progress_endpoint_never_holds_back_the_result(paired: Any) -> None:
    cp, proxy, config, _ = paired
    proxy.fail("/progress", 10_000, 503)
    async with running(config, StubRunner(cards=20)):
        task_id = cp.submit_task("progress is down")
        view = await finished(cp, proxy, task_id)
    assert view["result"]["resultText"] == "done: progress is down"
    assert all(s.status == 503 for s in proxy.requests("/progress"))
    assert view["executionProgress"]["status"] == "completed"  # carried by `complete`


async def test_malformed_tasks_fail_with_a_code_and_the_loop_goes_on(paired: Any) -> None:
    cp, proxy, config, _ = paired
    proxy.inject_claim([
        {"taskId": "tsk_bad_intent", "prompt": "x", "intentCategory": "make_coffee"},
        {"taskId": "tsk_no_prompt"},
        {"taskId": "tsk_huge", "prompt": "x" * 200_001},
        {"taskId": "tsk_bad_type", "prompt": "x", "attempt": "one"},
        {"prompt": "no id at all"},
        "not even an object",
    ])
    runner = StubRunner(cards=1)
    async with running(config, runner):
        await proxy.wait_for(lambda: len(proxy.requests("/complete")) >= 4)
        codes = {s.path.split("/")[-2]: s.body["error"]["code"] for s in proxy.requests("/complete")}
        assert codes == {"tsk_bad_intent": "unsupported_intent", "tsk_no_prompt": "invalid_task",
                         "tsk_huge": "prompt_too_large", "tsk_bad_type": "invalid_task"}
        assert all(s.body["status"] == "failed" for s in proxy.requests("/complete"))
        task_id = cp.submit_task("still alive")
        assert (await finished(cp, proxy, task_id))["result"]["status"] == "completed"
    assert runner.runs == [task_id]


@pytest.mark.parametrize("decision", ["accept", "decline"])
async def test_a_remote_approval_is_asked_once_and_answered_from_the_control_plane(
    paired: Any, decision: str,
) -> None:
    cp, proxy, config, _ = paired
    proxy.fail("/approvals", 1, 503)  # the retried POST must not make a second approval
    runner = StubRunner(cards=1, approval=True)
    async with running(config, runner):
        task_id = cp.submit_task("needs approval")
        await proxy.wait_for(lambda: cp.task(task_id)["approvals"])
        approval = cp.task(task_id)["approvals"][0]
        cp.decide(task_id, approval["approvalId"], decision)
        view = await finished(cp, proxy, task_id)
    assert runner.decisions[task_id] == decision
    assert len(view["approvals"]) == 1 and approval["summary"] == "Run a command"
    assert [s.status for s in proxy.requests("/approvals")] == [503, 201]


async def test_an_approval_nobody_answers_is_declined_at_the_timeout(paired: Any, tmp_path: Path) -> None:
    cp, proxy, _, _ = paired
    config = make_config(tmp_path, server_url=proxy.url, workspace=tmp_path, codex__approval_timeout_s=1)
    runner = StubRunner(cards=0, approval=True)
    async with running(config, runner):
        task_id = cp.submit_task("nobody answers")
        await finished(cp, proxy, task_id)
    assert runner.decisions[task_id] == "decline"


async def test_a_cancel_in_the_heartbeat_answer_cancels_the_running_task(paired: Any) -> None:
    cp, proxy, config, _ = paired
    proxy.heartbeat_interval_ms = 1000  # the server's minimum we obey; keeps the test short
    runner = StubRunner(cards=1, hold=True)
    async with running(config, runner):
        task_id = cp.submit_task("long job")
        await asyncio.wait_for(runner.started_event(task_id).wait(), WAIT_S)
        cp.cancel_task(task_id)
        view = await finished(cp, proxy, task_id)
    assert view["result"]["status"] == "cancelled"


async def test_a_revoked_token_stops_claiming_shows_unpaired_and_a_new_pairing_resumes(
    paired: Any,
) -> None:
    cp, proxy, config, identity = paired
    proxy.heartbeat_interval_ms = 1000
    async with running(config, StubRunner(cards=1)) as daemon:
        source = daemon.source
        assert source is not None
        await proxy.wait_for(lambda: proxy.requests("/heartbeat"))
        cp.revoke_device(identity.device_id)
        await asyncio.wait_for(source.revoked.wait(), WAIT_S)
        daemon.write_state()
        state = json.loads((config.state_dir / STATE_FILE).read_text())
        assert state["paired"] is False and state["unpaired"] is True
        assert identity.token not in (config.state_dir / STATE_FILE).read_text()
        # The user pairs again while the daemon runs: it picks the new token up.
        again = await pair_device(config.state_dir, proxy.url, cp.create_pairing_code(), policy=FAST)
        await asyncio.wait_for(source.authorized.wait(), WAIT_S)
        task_id = cp.submit_task("after re-pairing")
        view = await finished(cp, proxy, task_id)
    assert view["result"]["status"] == "completed" and view["deviceId"] == again.device_id


async def test_a_stop_request_interrupts_running_tasks_and_reports_them_cancelled(paired: Any) -> None:
    cp, _, config, _ = paired
    runner = StubRunner(cards=1, hold=True)
    async with running(config, runner):
        task_id = cp.submit_task("never finishes")
        await asyncio.wait_for(runner.started_event(task_id).wait(), WAIT_S)
    view = cp.task(task_id)
    assert view["result"]["status"] == "cancelled"
    assert (config.state_dir / "running").exists() and not list((config.state_dir / "running").iterdir())


async def test_a_wall_clock_jump_heartbeats_at_once(paired: Any) -> None:
    _, proxy, config, _ = paired
    jump = {"s": 0.0}

    async with running(config, StubRunner(), wall_clock=lambda: time.time() + jump["s"]):
        await proxy.wait_for(lambda: len(proxy.requests("/heartbeat")) == 1)
        jump["s"] = 3600.0  # as if the lid was closed for an hour
        await proxy.wait_for(lambda: len(proxy.requests("/heartbeat")) >= 2)


async def test_the_running_daemon_sweeps_empty_scratch_dirs_unused_for_a_week(paired: Any) -> None:
    _, _, config, _ = paired
    scratch = config.state_dir / "scratch"
    stale, used = scratch / "task-stale", scratch / "task-used"
    stale.mkdir(parents=True)
    used.mkdir()
    (used / "answer.md").write_text("kept")
    week_ago = time.time() - 8 * 24 * 3600
    for path in (stale, used):
        os.utime(path, (week_ago, week_ago))
    async with running(config, StubRunner()):
        await eventually(lambda: not stale.exists())
    assert (used / "answer.md").exists()


async def test_a_result_refused_as_too_large_stays_spooled_shows_in_status_and_arrives_later(
        paired: Any) -> None:
    """Device API §5: a 413 on complete is resent trimmed; refused even then, the result
    stays in the spool with backoff (status says so) until the server takes it."""
    from boss_agent.cli.status import collect_status
    from boss_agent.sources.boss.flusher import COMPLETE_TRIMS

    cp, proxy, config, _ = paired
    proxy.fail("/complete", 10_000, 413)  # a server whose body limit nothing fits under
    async with running(config, StubRunner(cards=1)) as daemon:
        source = daemon.source
        assert source is not None
        task_id = cp.submit_task("too big for this server")
        rounds = 1 + len(COMPLETE_TRIMS)  # as sent, then each trim
        await proxy.wait_for(lambda: len(proxy.requests(f"/{task_id}/complete")) >= 2 * rounds)
        assert task_id in source.spool and task_id not in source.flusher.delivered
        bodies = [s.body for s in proxy.requests(f"/{task_id}/complete")[:rounds]]
        sizes = [len(json.dumps(b["executionProgress"])) for b in bodies]
        assert sizes[1] <= sizes[0] and bodies[0]["resultText"] == "done: too big for this server"
        daemon.write_state()
        assert "413" in collect_status(config)["spoolRefused"]
        assert cp.task(task_id)["status"] == "running"
        proxy.faults.clear()  # the server takes it now
        view = await finished(cp, proxy, task_id)
        await spool_empty(daemon)
        daemon.write_state()
        assert "spoolRefused" not in collect_status(config)
    assert view["result"]["status"] == "completed"
    assert view["result"]["resultText"] == "done: too big for this server"


async def test_a_progress_card_refused_as_too_large_is_resent_at_once_trimmed(paired: Any) -> None:
    cp, proxy, config, _ = paired
    proxy.fail("/progress", 1, 413)
    async with running(config, StubRunner(cards=1)) as daemon:
        task_id = cp.submit_task("a card too big")
        await finished(cp, proxy, task_id)
        await spool_empty(daemon)
    uploads = proxy.requests(f"/{task_id}/progress")
    assert [u.status for u in uploads[:2]] == [413, 200]
    assert uploads[0].body["seq"] == uploads[1].body["seq"] == 1  # the same upload, resent
    assert uploads[1].body["executionProgress"]["omitted"]["steps"] == 0


class ApiCalls:
    """The daemon's device-API calls and its runner's starts, in the order they were made.

    BossApi's own methods are wrapped and called through: every request still goes to
    the control plane.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch, runner: StubRunner) -> None:
        self.order: list[tuple[str, str]] = []
        claim, heartbeat, progress, run = BossApi.claim, BossApi.heartbeat, BossApi.progress, runner.run

        async def claim_noted(api: BossApi, *args: Any, **kwargs: Any) -> list[Any]:
            self.order.append(("claim", ""))
            tasks = await claim(api, *args, **kwargs)
            self.order.extend(("claimed", task["taskId"]) for task in tasks)
            return tasks

        async def heartbeat_noted(api: BossApi, *args: Any, **kwargs: Any) -> dict[str, Any]:
            self.order.append(("heartbeat", ""))
            return await heartbeat(api, *args, **kwargs)

        async def progress_noted(api: BossApi, task_id: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
            self.order.append(("progress", task_id))
            return await progress(api, task_id, *args, **kwargs)

        async def run_noted(task: Task, sink: TaskSink, cancel: asyncio.Event) -> TaskResult:
            self.order.append(("run", task.task_id))
            return await run(task, sink, cancel)

        monkeypatch.setattr(BossApi, "claim", claim_noted)
        monkeypatch.setattr(BossApi, "heartbeat", heartbeat_noted)
        monkeypatch.setattr(BossApi, "progress", progress_noted)
        monkeypatch.setattr(runner, "run", run_noted)

    def after(self, event: tuple[str, str], kind: str) -> int:
        """The position of the first call of ``kind`` after ``event``."""
        start = self.order.index(event)
        return next(i for i, (name, _) in enumerate(self.order) if i > start and name == kind)


async def test_a_claimed_task_reaches_its_runner_before_the_next_claim_and_the_heartbeat(
    paired: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The daemon's own requests (about a millisecond of its loop each) wait for the
    claimed task's start: the next claim for its runner, the heartbeat that tells the
    new state for its first progress upload (the server knows the task from the claim)."""
    cp, proxy, config, _ = paired
    runner = StubRunner(cards=1, hold=True)
    calls = ApiCalls(monkeypatch, runner)
    async with running(config, runner):
        await proxy.wait_for(lambda: proxy.requests("/heartbeat"))
        task_id = cp.submit_task("first things first")
        await proxy.wait_for(lambda: ("claimed", task_id) in calls.order
                             and calls.order.count(("heartbeat", "")) >= 2
                             and calls.order.count(("claim", "")) >= 2)
        claimed = ("claimed", task_id)
        assert calls.order.index(("run", task_id)) < calls.after(claimed, "claim")
        assert calls.order.index(("progress", task_id)) < calls.after(claimed, "heartbeat")
        runner.release.set()
        assert (await finished(cp, proxy, task_id))["result"]["status"] == "completed"


async def test_a_task_that_ends_at_once_leaves_no_running_record(paired: Any) -> None:
    """The running journal's record is written once the runner has begun, in a thread,
    and taken out with the result: a task done before its record is on disk must not
    leave one behind (it would come back at the next start as a task the agent lost).
    The orderings themselves are in tests/unit/test_boss_spool.py."""
    cp, proxy, config, _ = paired
    async with running(config, StubRunner(cards=0)) as daemon:
        ids = [cp.submit_task(f"quick {i}") for i in range(5)]
        for task_id in ids:
            assert (await finished(cp, proxy, task_id))["result"]["status"] == "completed"
        await spool_empty(daemon)
    assert RunningJournal(config.state_dir).ids() == []
