"""The demo model drives the real codex through the whole demo loop."""

from __future__ import annotations

from pathlib import Path

from boss_agent.demo import scripted_model as sm
from boss_agent.demo.model import DEMO_FILE, demo_responder
from tests.support.codex_raw import RawCodex, accept


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
