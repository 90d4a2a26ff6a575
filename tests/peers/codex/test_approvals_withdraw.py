"""Withdraw: when Codex stops waiting, the approval stops being offered (real codex).

Before the fix the control plane kept a cancelled or timed-out task's approval
``pending``: the page offered buttons that could change nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from boss_agent.demo import scripted_model as sm
from tests.support.approvals import ParentAndChild, daemon_on_codex

pytestmark = pytest.mark.codex


def _needs_approval(model: sm.ScriptedModel) -> None:
    model.enqueue(sm.turn(sm.shell_call("touch never.txt", call_id="call_w")), sm.text_reply("done"))


async def test_an_approval_nobody_answers_is_withdrawn_at_the_timeout(
        tmp_path: Path, codex_bin: str, codex_home: Path, workdir: Path,
        scripted_model: sm.ScriptedModel) -> None:
    _needs_approval(scripted_model)
    async with daemon_on_codex(tmp_path, codex_bin, codex_home, codex__approval_timeout_s=1) as boss:
        task_id = boss.cp.submit_task("make a file", workdir=str(workdir), approvalPolicy="untrusted")
        view = await boss.finished(task_id)
        (approval,) = view["approvals"]
        late = await boss.decide(task_id, approval["approvalId"], "accept")
    assert approval["status"] == "withdrawn" and approval["withdrawReason"] == "timeout", approval
    assert late.status_code == 409
    assert not (workdir / "never.txt").exists()


async def test_a_cancelled_tasks_pending_approval_is_withdrawn(
        tmp_path: Path, codex_bin: str, codex_home: Path, workdir: Path,
        scripted_model: sm.ScriptedModel) -> None:
    _needs_approval(scripted_model)
    async with daemon_on_codex(tmp_path, codex_bin, codex_home) as boss:
        task_id = boss.cp.submit_task("make a file", workdir=str(workdir), approvalPolicy="untrusted")
        await boss.first_approval(task_id)
        boss.cp.cancel_task(task_id)
        view = await boss.finished(task_id)
        await boss.until(lambda: boss.task(task_id)["approvals"][0]["status"] != "pending")
        (approval,) = boss.task(task_id)["approvals"]
    assert view["status"] == "cancelled"
    assert approval["status"] == "withdrawn" and approval["withdrawReason"] in ("cancelled", "resolved")
    assert not (workdir / "never.txt").exists()


async def test_a_sub_agents_approval_still_open_when_the_turn_ends_is_withdrawn(
        tmp_path: Path, codex_bin: str, workdir: Path) -> None:
    with sm.ScriptedModel(ParentAndChild("touch late.txt", parent_waits=False)) as model:
        home = sm.write_codex_home(tmp_path / "codex-home", model.base_url, model="mock-model")
        async with daemon_on_codex(tmp_path, codex_bin, home) as boss:
            task_id = boss.cp.submit_task("delegate", workdir=str(workdir), approvalPolicy="untrusted")
            await boss.first_approval(task_id)
            model.release()  # the parent's turn ends while its child still waits on the person
            view = await boss.finished(task_id)
            await boss.until(lambda: boss.task(task_id)["approvals"][0]["status"] != "pending")
            (approval,) = boss.task(task_id)["approvals"]
    assert view["result"]["status"] == "completed", view["result"]
    assert approval["status"] == "withdrawn" and approval["withdrawReason"] == "turn_ended"
    assert not (workdir / "late.txt").exists()
