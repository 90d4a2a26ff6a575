"""The card's bounds on the real codex binary: a plan far bigger than any server takes.

The daemon runs a real ``codex app-server`` driven by the scripted model and reports
to the real local control plane, which refuses bodies over 8 MiB (``MAX_BODY_BYTES``)
as a Boss server may. A 40,000-step ``update_plan`` made a 10 MB card that the server
answered with 413, and the result was dropped; the card's caps keep it under 256 KiB.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from boss_agent.controlplane import ControlPlane
from boss_agent.controlplane.server import MAX_BODY_BYTES
from boss_agent.daemon.runtime import Daemon
from boss_agent.demo import scripted_model as sm
from boss_agent.progress.bounds import CARD_MAX_BYTES, MAX_STEPS, wire_size
from boss_agent.sources.boss.pairing import pair_device
from boss_agent.sources.boss.retry import BossApiRetry
from tests.support.config import make_config
from tests.support.daemon import WAIT_S
from tests.support.waits import eventually

pytestmark = pytest.mark.codex
FAST = BossApiRetry.fast()
PLAN_STEPS = 40_000
TITLE = "x" * 220  # with its number, a 40,000-step plan is over 10 MB of card
TASK_TIMEOUT_S = 60  # the turn takes a few seconds here; under the test timeout, with room for a loaded box


def _finished(cp: ControlPlane, task_id: str) -> dict[str, Any] | None:
    view = cp.task(task_id)
    return view if view["status"] in ("completed", "failed", "cancelled") else None


async def test_a_40000_step_plan_reaches_a_server_that_refuses_8_mib_with_a_bounded_card(
    tmp_path: Path, codex_bin: str, codex_home: Path, workdir: Path, scripted_model: sm.ScriptedModel,
) -> None:
    assert MAX_BODY_BYTES == 8 * 1024 * 1024
    plan = [(f"step {i} {TITLE}", "completed" if i < 39_000 else "pending") for i in range(PLAN_STEPS)]
    plan[39_000] = (plan[39_000][0], "in_progress")
    scripted_model.enqueue(sm.turn(sm.update_plan(plan)), sm.turn(sm.message("Planned it all.")))
    async with ControlPlane(tmp_path / "cp" / "boss.db") as cp:
        config = make_config(tmp_path, server_url=cp.url, workspace=tmp_path, codex__bin=codex_bin)
        await pair_device(config.state_dir, cp.url, cp.create_pairing_code(), policy=FAST)
        daemon = Daemon(config, codex_home=codex_home, env={"CODEX_HOME": str(codex_home)},
                        retry_policy=FAST, claim_wait_ms=300, handle_signals=False)
        ready = asyncio.Event()
        async with asyncio.TaskGroup() as tg:
            job = tg.create_task(daemon.run(ready))
            await asyncio.wait_for(ready.wait(), 60)
            task_id = cp.submit_task("plan a lot", workdir=str(workdir))
            view = await eventually(lambda: _finished(cp, task_id), TASK_TIMEOUT_S)
            daemon.request_stop()
            await asyncio.wait_for(job, WAIT_S)
    assert view["result"]["status"] == "completed", view["result"]
    assert view["result"]["resultText"] == "Planned it all."
    card = view["executionProgress"]
    assert card["status"] == "completed"
    assert wire_size(card) < CARD_MAX_BYTES, wire_size(card)
    assert len(card["steps"]) == MAX_STEPS and card["omitted"]["steps"] == PLAN_STEPS - MAX_STEPS
    # The unresolved steps win over the 39,000 completed ones: the one in progress
    # (completed with the task), then the newest of the 999 pending ones.
    titles = [s["title"].split(" ")[1] for s in card["steps"]]
    assert titles == ["39000", *(str(i) for i in range(39_801, 40_000))]
    assert card["steps"][0]["status"] == "completed"
    assert {s["status"] for s in card["steps"][1:]} == {"pending"}
