"""Steering a running turn from the control plane (device API §3-§4), on real codex.

The live ``codexThreadRef``/``turnId`` must leave the device with progress uploads
(the app needs them to steer), and a steer task must reach its turn even when the
device's only slot is taken by that very turn.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from boss_agent.controlplane import ControlPlane
from boss_agent.demo import scripted_model as sm
from tests.support.config import make_config
from tests.support.daemon import FaultProxy, paired_daemon

pytestmark = pytest.mark.codex
TASK_WAIT_S = 60  # codex start-up plus a few scripted model round trips


def _live_refs(proxy: FaultProxy, task_id: str) -> list[dict[str, Any]]:
    return [s.body for s in proxy.requests(f"/{task_id}/progress")
            if s.status == 200 and s.body.get("turnId")]


# A steer into a hung response: a codex before 0.169 holds it until the response ends.
@pytest.mark.codex_feature("immediate_steer")
async def test_with_one_slot_a_steer_reaches_the_running_turn_it_names(
    tmp_path: Path, plane: ControlPlane, proxy: FaultProxy, codex_bin: str, codex_home: Path,
    workdir: Path, scripted_model: sm.ScriptedModel,
) -> None:
    config = make_config(tmp_path, server_url=proxy.url, workspace=tmp_path,
                         codex__bin=codex_bin, max_concurrent_tasks=1)
    scripted_model.enqueue(sm.hang(sm.message("working on it")), sm.text_reply("steered answer"))
    async with paired_daemon(config, proxy.url, plane.create_pairing_code(), codex_home):
        running_id = plane.submit_task("a long job", workdir=str(workdir))
        # The live ids arrive with progress, long before `complete`.
        await proxy.wait_for(lambda: _live_refs(proxy, running_id), timeout=TASK_WAIT_S)
        upload = _live_refs(proxy, running_id)[0]
        view = plane.task(running_id)
        assert view["status"] == "running"
        assert view["codexThreadRef"] == upload["codexThreadRef"] and view["turnId"] == upload["turnId"]
        await asyncio.to_thread(scripted_model.wait_for_requests, 1, TASK_WAIT_S)
        steer_id = plane.submit_task("focus on the tests", workdir=str(workdir),
                                  codexThreadRef=view["codexThreadRef"],
                                  targetCodexTurnId=view["turnId"])
        done = {task_id: await plane.wait_task(task_id, lambda v: v["result"] is not None, TASK_WAIT_S)
                for task_id in (steer_id, running_id)}
    steer, original = done[steer_id]["result"], done[running_id]["result"]
    assert steer["status"] == "completed", steer
    assert steer["turnId"] == view["turnId"] and steer["resultText"] == "steered answer"
    assert original["status"] == "completed" and original["turnId"] == view["turnId"]
    assert "focus on the tests" in scripted_model.requests[-1].input_texts()
    # The steer never asked for a slot the running turn held.
    claims = [s.body["slots"] for s in proxy.requests("/tasks/claim")]
    assert 0 in claims and max(claims) == 1
