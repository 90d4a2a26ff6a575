"""The demo model drives the real codex through the whole demo loop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from boss_agent.demo import scripted_model as sm
from boss_agent.demo.model import DEMO_FILE, demo_responder
from tests.peers.codex.test_harness import RawCodex


def test_the_demo_plans_asks_approval_writes_a_file_and_answers(codex_bin: str, tmp_path: Path,
                                                                  workdir: Path) -> None:
    with sm.ScriptedModel(responder=demo_responder) as model:
        home = sm.write_codex_home(tmp_path / "home", model.base_url)
        codex = RawCodex(codex_bin, home, workdir)
        try:
            codex.request("initialize", {"clientInfo": {"name": "demo-test", "version": "0"}})
            codex.send({"method": "initialized"})
            thread = codex.request("thread/start", {"cwd": str(workdir), "approvalPolicy": "on-request",
                                                    "sandbox": "workspace-write"})["result"]["thread"]
            codex.request("turn/start", {"threadId": thread["id"], "input": [{"type": "text", "text": "demo"}]})
            seen: list[str] = []

            def step(message: dict[str, Any]) -> bool:
                if "id" in message and "method" in message:
                    seen.append(message["method"])
                    codex.send({"id": message["id"], "result": {"decision": "accept"}})
                elif message.get("method") == "turn/plan/updated":
                    seen.append("plan")
                return message.get("method") == "turn/completed"

            done = codex.until(step)
        finally:
            codex.close()
    assert done["params"]["turn"]["status"] == "completed"
    assert seen.count("item/commandExecution/requestApproval") == 1
    assert seen.count("plan") == 3
    assert (workdir / DEMO_FILE).read_text().startswith("# Written by the boss-agent demo")
    final = done["params"]["turn"]["items"][-1]
    assert final["text"].startswith("Done.")
