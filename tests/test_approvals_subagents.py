"""Sub-agent approvals on real codex: a child thread's request reaches the person.

With an unknown model slug codex advertises the ``multi_agent_v1`` tools, so the
scripted model can spawn a sub-agent whose command needs approval. Before the fix
the router knew only the task's own thread: the child's request was declined by
default and the card never showed the background agent.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from boss_agent.controlplane import ControlPlane
from boss_agent.daemon.runtime import Daemon
from boss_agent.demo import scripted_model as sm
from boss_agent.sources.boss.pairing import pair_device
from boss_agent.sources.boss.retry import RetryPolicy
from tests.daemon_support import WAIT_S, FaultProxy, make_config

pytestmark = pytest.mark.codex
FAST = RetryPolicy.fast()
TURN_WAIT_S = 60  # a parent, a child and an approval round trip on a loaded 2-core box


class ParentAndChild:
    """Scripts two threads by the ``thread-id`` header codex sends with each model request.

    The parent spawns one agent and waits for it; the child runs ``command`` (which needs
    approval under ``untrusted``) and answers.
    """

    def __init__(self, command: str) -> None:
        self.command = command
        self.parent: str | None = None
        self.turns: dict[str, int] = {}
        self.lock = threading.Lock()

    def __call__(self, request: sm.RecordedRequest) -> sm.Response:
        thread = request.headers.get("thread-id", "")
        with self.lock:
            self.parent = self.parent or thread
            step = self.turns[thread] = self.turns.get(thread, 0) + 1
        outputs = request.tool_outputs()
        if thread == self.parent:
            if step == 1:
                return sm.turn(sm.spawn_agent("make the marker file", call_id="call_spawn"))
            if step == 2:
                agent = json.loads(outputs["call_spawn"])["agent_id"]
                return sm.turn(sm.wait_agent([agent], call_id="call_wait"))
            return sm.text_reply("the sub-agent made the marker")
        if step == 1:
            return sm.turn(sm.shell_call(self.command, call_id="call_child"))
        return sm.text_reply("marker made")


@pytest.fixture
async def plane(tmp_path: Path) -> AsyncIterator[tuple[ControlPlane, FaultProxy]]:
    async with ControlPlane(tmp_path / "cp" / "boss.db") as cp, FaultProxy(cp.url) as proxy:
        yield cp, proxy


async def test_a_sub_agents_approval_reaches_the_control_plane_and_accepting_runs_it(
    tmp_path: Path, plane: tuple[ControlPlane, FaultProxy], codex_bin: str, workdir: Path,
) -> None:
    cp, proxy = plane
    config = make_config(tmp_path, proxy.url, codex__bin=codex_bin)
    await pair_device(config.state_dir, proxy.url, cp.create_pairing_code(), policy=FAST)
    script = ParentAndChild("touch child_marker.txt")
    with sm.ScriptedModel(script) as model:
        home = sm.write_codex_home(tmp_path / "codex-home", model.base_url, model="mock-model")
        daemon = Daemon(config, codex_home=home, env={"CODEX_HOME": str(home)},
                        retry_policy=FAST, claim_wait_ms=300, handle_signals=False)
        ready = asyncio.Event()
        async with asyncio.TaskGroup() as tg:
            job = tg.create_task(daemon.run(ready))
            await asyncio.wait_for(ready.wait(), TURN_WAIT_S)
            task_id = cp.submit_task("delegate the marker", workdir=str(workdir),
                                     approvalPolicy="untrusted")
            await proxy.wait_for(lambda: cp.task(task_id)["approvals"]
                                 or cp.task(task_id)["status"] in ("completed", "failed"),
                                 timeout=TURN_WAIT_S)
            approvals = cp.task(task_id)["approvals"]
            assert approvals, cp.task(task_id)  # before the fix: declined by default, never asked
            (approval,) = approvals
            async with httpx.AsyncClient(base_url=cp.url) as local:
                answer = await local.post(
                    f"/api/local/approvals/{task_id}/{approval['approvalId']}",
                    json={"decision": "accept"}, headers={"Authorization": f"Bearer {cp.secret}"})
                assert answer.status_code == 200, answer.text
            await proxy.wait_for(lambda: cp.task(task_id)["status"] in ("completed", "failed"),
                                 timeout=TURN_WAIT_S)
            view = cp.task(task_id)
            daemon.request_stop()
            await asyncio.wait_for(job, WAIT_S)
    assert view["result"]["status"] == "completed", view["result"]
    assert (workdir / "child_marker.txt").exists()
    assert approval["kind"] == "command" and "child_marker" not in approval["summary"]
    card = view["executionProgress"]
    assert [a["status"] for a in card["approvals"]] == ["accepted"]
    assert card["backgroundAgents"] and card["backgroundAgents"][0]["status"] == "completed", card
    assert any(c["tool"] == "spawnAgent" for c in card["threadCollaboration"])
    # the sub-agent's own answer is not the task's answer
    assert view["result"]["resultText"] == "the sub-agent made the marker"
    assert "marker made" not in json.dumps(card)
