"""The card names every limit the device put on a task (checked against real codex).

Already the behaviour before this work (no regression to reproduce): kept as a
guard, since the owner's caps are only trustworthy if the phone shows them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from boss_agent.appserver.client import AppServer
from boss_agent.demo import scripted_model as sm
from boss_agent.runner import Runner
from tests.support.config import make_config
from tests.support.runner import Sink
from tests.support.security import hostile

pytestmark = [pytest.mark.codex]


async def test_every_cap_applied_to_a_task_is_a_warning_on_its_card(
        tmp_path: Path, codex_bin: str, codex_home: Path, scripted_model: sm.ScriptedModel) -> None:
    config = make_config(tmp_path, codex_bin, **{"codex.approval_modes": ["deny"]})
    scripted_model.enqueue(sm.text_reply("done"))
    async with AppServer.from_config(config, codex_home=codex_home) as app:
        result = await Runner(config, app, codex_home=codex_home).run(
            hostile(sandbox="danger-full-access", approvalPolicy="never", approvalMode="remote"),
            Sink(), asyncio.Event())
    assert result.status == "completed", result
    warnings = {w["message"] for w in result.execution_progress["warnings"]}
    assert warnings >= {"sandbox capped to workspace-write by this device",
                        "approval policy capped to on-request by this device",
                        "remote approvals are disabled on this device; requests are declined"}
    # The caps are what codex ran with, not only what the card says.
    assert any("workspace-write" in text for text in scripted_model.requests[-1].input_texts())
