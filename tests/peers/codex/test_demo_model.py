"""The demo model drives the real codex through the whole demo loop, and a steer does not restart it.

Before the fix the demo counted only the tool results after the last user message,
so a steer (a user message in the running turn) started the tour over and asked for
the command's approval a second time.
"""

from __future__ import annotations

from pathlib import Path

from boss_agent.cli.up import demo_codex_home
from boss_agent.demo import scripted_model as sm
from boss_agent.demo.model import DEMO_FILE, STEER_ACK, demo_responder
from tests.support.codex_raw import RawCodex, accept, is_turn_completed, method_is

COMMAND_APPROVAL = "item/commandExecution/requestApproval"


def test_the_demo_plans_asks_approval_writes_a_file_and_answers(codex_bin: str, tmp_path: Path,
                                                                  workdir: Path) -> None:
    with sm.ScriptedModel(responder=demo_responder) as model:
        home = sm.write_codex_home(tmp_path / "home", model.base_url)
        codex = RawCodex(codex_bin, home, workdir).start()
        try:
            thread_id = codex.start_thread(workdir, approvalPolicy="on-request", sandbox="workspace-write")
            messages = codex.run_turn(thread_id, "demo", accept)
        finally:
            codex.close()
    seen = ["plan" if m["method"] == "turn/plan/updated" else m["method"] for m in messages
            if "id" in m or m["method"] == "turn/plan/updated"]
    done = messages[-1]
    assert done["params"]["turn"]["status"] == "completed"
    assert seen.count("item/commandExecution/requestApproval") == 1
    assert seen.count("plan") == 3
    assert (workdir / DEMO_FILE).read_text().startswith("# Written by the boss-agent demo")
    final = done["params"]["turn"]["items"][-1]
    assert final["text"].startswith("Done.")


def _exec_calls(model: sm.ScriptedModel) -> list[str]:
    """The call ids of every ``exec_command`` the demo made, over all its answers."""
    calls = {entry["call_id"] for request in model.requests for entry in request.body.get("input", [])
             if entry.get("type") == "function_call" and entry.get("name") == "exec_command"}
    return sorted(calls)


def test_a_steer_while_the_approval_waits_goes_on_without_asking_it_again(
        codex_bin: str, tmp_path: Path, workdir: Path) -> None:
    with sm.ScriptedModel(responder=demo_responder) as model:
        codex = RawCodex(codex_bin, demo_codex_home(tmp_path, model.base_url), workdir).start()
        try:
            thread_id = codex.start_thread(workdir, approvalPolicy="on-request", sandbox="workspace-write")
            started = codex.request("turn/start", {"threadId": thread_id,
                                                   "input": [{"type": "text", "text": "Tidy the project up"}]})
            (asked,) = [m for m in codex.record(thread_id, method_is(COMMAND_APPROVAL), None) if "id" in m]
            # codex has the steer once turn/steer answers; only then is the approval given.
            codex.request("turn/steer", {"threadId": thread_id, "expectedTurnId": started["turn"]["id"],
                                         "input": [{"type": "text", "text": "also look at the docs"}]})
            codex.send({"id": asked["id"], "result": {"decision": "accept"}})
            rest = codex.record(thread_id, lambda m: is_turn_completed(m) or "id" in m, None)
        finally:
            codex.close()
    assert is_turn_completed(rest[-1]), f"asked again after the steer: {rest[-1]['method']}"
    assert len(_exec_calls(model)) == 1
    texts = [m["params"]["item"].get("text") for m in rest
             if m["method"] == "item/completed" and m["params"]["item"]["type"] == "agentMessage"]
    assert STEER_ACK in texts and texts[-1].startswith("Done. I looked at the project")
    assert (workdir / DEMO_FILE).is_file()
