"""Finding 4 (git): the after-turn git probes never run a program the repository names.

boss-agent reads the branch and the diff size after every turn, outside the sandbox.
A sandboxed turn can plant ``core.fsmonitor`` (or a hook, an external diff, a clean
filter) in a ``.git`` it may write, in its workdir or a parent of it, and have that
run by boss-agent. The probes now switch every such program off.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from boss_agent.appserver.client import AppServer
from boss_agent.demo import scripted_model as sm
from boss_agent.runner import Runner
from tests.support.config import make_config
from tests.support.runner import Sink
from tests.support.security import hostile

pytestmark = [pytest.mark.codex]

GIT = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]


def _repo(path: Path) -> None:
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    (path / "README").write_text("hello\n")
    (path / ".gitattributes").write_text("* filter=evil diff=evil\n")
    subprocess.run([*GIT, "-C", str(path), "add", "."], check=True)
    subprocess.run([*GIT, "-C", str(path), "commit", "-qm", "init"], check=True)


def _plant(repo: Path, marker: Path) -> None:
    """Every repository-controlled program a probe could reach writes ``marker``."""
    script = repo / "evil.sh"
    # Each run records the first ancestor that is not git or a shell: the process that ran git.
    script.write_text(f"""#!/bin/sh
p=$PPID
while [ "$p" -gt 1 ]; do
  c=$(cat /proc/$p/comm)
  case "$c" in git|sh|bash|dash) p=$(cut -d' ' -f4 /proc/$p/stat);; *) break;; esac
done
echo "$p $c $0 $*" >> {marker}
cat
""")
    script.chmod(0o755)
    hooks = repo / ".git" / "hooks"
    for hook in ("post-index-change", "reference-transaction"):
        (hooks / hook).write_text(script.read_text())
        (hooks / hook).chmod(0o755)
    for key, value in (("core.fsmonitor", str(script)), ("diff.external", str(script)),
                       ("filter.evil.clean", str(script)), ("diff.evil.textconv", str(script))):
        subprocess.run(["git", "-C", str(repo), "config", key, value], check=True)
    # A changed file, so status and diff have contents to look at.
    (repo / "README").write_text("changed by the turn\n")


@pytest.mark.parametrize("where", ["workdir", "parent"])
async def test_a_repository_s_config_runs_nothing_when_boss_agent_reads_git_facts(
        tmp_path: Path, codex_bin: str, codex_home: Path, scripted_model: sm.ScriptedModel,
        where: str) -> None:
    config = make_config(tmp_path, codex_bin)
    repo = config.workspaces[0] / "repo"
    repo.mkdir()
    _repo(repo)
    workdir = repo if where == "workdir" else repo / "sub"
    workdir.mkdir(exist_ok=True)
    marker = tmp_path / "repository-program-ran"
    _plant(repo, marker)
    scripted_model.enqueue(sm.text_reply("done"))
    async with AppServer.from_config(config, codex_home=codex_home) as app:
        result = await Runner(config, app, codex_home=codex_home).run(
            hostile(workdir=str(workdir)), Sink(), asyncio.Event())
    assert result.status == "completed", result
    runs = marker.read_text().splitlines() if marker.exists() else []
    # codex itself runs git in its cwd (and with it the repository's clean filter); that is
    # codex's own business. boss-agent's probes (git started by this process) ran nothing.
    assert [run for run in runs if int(run.split()[0]) == os.getpid()] == []
    branch = result.execution_progress["branch"]
    if where == "workdir":  # the facts are still read, without running anything
        assert branch and branch["name"] == "main" and branch["changedFiles"] >= 1
    else:  # a parent's repository is not looked for at all
        assert branch is None
