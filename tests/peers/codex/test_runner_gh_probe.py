"""Tasks finishing together ask ``gh auth status`` once, not once each (real codex).

The runner reads the GitHub CLI's state once and keeps it. Before the fix, every task
of a first concurrent batch found it unknown and spawned its own ``gh auth status``
(a network round trip each) at the same moment. ``gh`` itself is a stand-in script
that counts its runs: the real one needs a GitHub login no test machine has.
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from boss_agent.appserver.client import AppServer
from boss_agent.demo import scripted_model as sm
from boss_agent.runner import Runner
from boss_agent.tasks import Task
from tests.support.runner import Sink, module_env

pytestmark = pytest.mark.codex

TASKS = 4
GH_LATENCY_S = 2  # the stand-in's answer time: a network round trip on a slow link


async def test_a_concurrent_first_batch_probes_the_github_cli_once(
        tmp_path: Path, codex_bin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = tmp_path / "gh-runs"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gh = bin_dir / "gh"
    # As slow as the real one's round trip to GitHub, so the batch's tasks overlap it.
    gh.write_text(f"#!/bin/sh\necho \"$@\" >> '{runs}'\nsleep {GH_LATENCY_S}\nexit 0\n")
    gh.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path('/usr/bin')}:{Path('/bin')}")
    with sm.ScriptedModel() as model:
        env = module_env(tmp_path, model, codex_bin)
        # Only a git work tree gets branch facts (and so the gh probe).
        await asyncio.to_thread(subprocess.run, ["git", "init", "-q", str(env["root"])], check=True)
        model.enqueue(*(sm.text_reply("done") for _ in range(TASKS)))
        async with AppServer.from_config(env["config"], codex_home=env["home"]) as app:
            runner = Runner(env["config"], app, codex_home=env["home"])
            results = await asyncio.gather(*(
                runner.run(Task(f"t{i}", "say done", workdir=str(env["root"])), Sink(), asyncio.Event())
                for i in range(TASKS)))
    assert [r.status for r in results] == ["completed"] * TASKS, results
    assert runs.read_text().splitlines() == ["auth status"]
