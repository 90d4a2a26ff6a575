"""Sub-agent approvals on real codex: a child thread's request reaches the person.

With an unknown model slug codex advertises the ``multi_agent_v1`` tools, so the
scripted model can spawn a sub-agent whose command needs approval. Before the fix
the router knew only the task's own thread: the child's request was declined by
default and the card never showed the background agent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from boss_agent.demo import scripted_model as sm
from tests.support.approvals import ParentAndChild, daemon_on_codex

pytestmark = pytest.mark.codex


async def test_a_sub_agents_approval_reaches_the_control_plane_and_accepting_runs_it(
        tmp_path: Path, codex_bin: str, workdir: Path) -> None:
    script = ParentAndChild("touch child_marker.txt")
    with sm.ScriptedModel(script) as model:
        home = sm.write_codex_home(tmp_path / "codex-home", model.base_url, model="mock-model")
        async with daemon_on_codex(tmp_path, codex_bin, home) as boss:
            task_id = boss.cp.submit_task("delegate the marker", workdir=str(workdir),
                                          approvalPolicy="untrusted")
            # before the fix: declined by default, never asked
            approval = await boss.first_approval(task_id)
            answer = await boss.decide(task_id, approval["approvalId"], "accept")
            assert answer.status_code == 200, answer.text
            view = await boss.finished(task_id)
    assert view["result"]["status"] == "completed", view["result"]
    assert (workdir / "child_marker.txt").exists()
    assert len(view["approvals"]) == 1
    assert approval["kind"] == "command" and "child_marker" not in approval["summary"]
    card = view["executionProgress"]
    assert [a["status"] for a in card["approvals"]] == ["accepted"]
    assert card["backgroundAgents"] and card["backgroundAgents"][0]["status"] == "completed", card
    assert any(c["tool"] == "spawnAgent" for c in card["threadCollaboration"])
    # the unknown slug's own warning, from the parent thread
    assert any("mock-model" in w["message"] for w in card["warnings"]), card["warnings"]
    # the sub-agent's own answer is not the task's answer
    assert view["result"]["resultText"] == "the sub-agent made the marker"
    assert "marker made" not in json.dumps(card)
