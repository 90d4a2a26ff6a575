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
from tests.support.approvals import ParentAndChild, daemon_on_codex, first_form, gateway_on_codex
from tests.support.gateway import ask, read_events, resume, sdk_client, sdk_redis

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


@pytest.mark.redis
async def test_a_sub_agents_approval_is_a_gateway_form_and_a_resume_runs_the_command(
        tmp_path: Path, codex_bin: str, workdir: Path, redis_server) -> None:
    script = ParentAndChild("touch gateway_marker.txt")
    redis = sdk_redis(redis_server.url)
    client = sdk_client(redis)
    with sm.ScriptedModel(script) as model:
        home = sm.write_codex_home(tmp_path / "codex-home", model.base_url, model="mock-model")
        async with gateway_on_codex(tmp_path, codex_bin, home, workdir, redis_server.url):
            await ask(client, "s-sub", "delegate the marker", "msg-sub",
                      extra_payload={"workdir": str(workdir), "approvalPolicy": "untrusted"})
            form = await first_form(redis, "s-sub", "msg-sub")
            await resume(client, "s-sub", "msg-sub", {"formId": form["formId"], "decision": "accept"})
            events = await read_events(redis, "s-sub", "msg-sub", timeout=60)
    await redis.aclose()
    assert "Run touch" in form["pluginMachineFields"][0]["description"]
    assert (workdir / "gateway_marker.txt").exists()
    final = [e for e in events if e.event_type == "finalAnswer"]
    assert final and final[0].data["choices"][0]["delta"]["content"] == "the sub-agent made the marker"
