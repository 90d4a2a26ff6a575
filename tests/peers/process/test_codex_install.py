"""The codex that `scripts/up.sh` installed is found, and a missing codex stops `up` and `run` at once.

Real ``python -m boss_agent`` processes. After ``up.sh`` codex lives under ``.tools/``, not
on the PATH; the scripts record its path in the state dir, and the daemon takes it from
there unless ``codex.bin`` names one. Without any codex, ``up`` and ``run`` refuse in one
line (exit 2: the set-up is the problem) naming the pinned install, before they pair or
write anything — instead of a page whose every task fails ``approval_unavailable``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from boss_agent.codexbin import PINNED_CODEX_VERSION, record_installed_codex
from boss_agent.controlplane.security import URL_FILE
from tests.support.cli import isolated, run_cli

PINNED_INSTALL = f"npm install -g @openai/codex@{PINNED_CODEX_VERSION}"
NO_CODEX_PATH = os.pathsep.join(("/usr/bin", "/bin"))  # the system's tools; codex is never there
# A refusal comes before any server starts: Python's start-up, seconds; an `up` that starts
# instead would serve until killed.
REFUSAL_TIMEOUT_S = 30


def _refused(done: subprocess.CompletedProcess[str], state: Path) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert not (state / "device.json").exists(), "it paired before it knew codex was there"
    assert not (state / "controlplane" / URL_FILE).exists()
    return lines[0]


def test_up_without_codex_on_the_path_refuses_in_one_line_naming_the_pinned_install(tmp_path: Path):
    env = isolated(tmp_path, PATH=NO_CODEX_PATH)
    line = _refused(run_cli("up", "--demo", "--port", "0", env=env, timeout=REFUSAL_TIMEOUT_S), tmp_path / "state")
    assert "codex" in line and PINNED_INSTALL in line, line


def test_up_with_a_codex_bin_that_is_not_there_refuses_naming_it(tmp_path: Path):
    env = isolated(tmp_path, BOSS_CODEX_BIN=str(tmp_path / "no-codex"))
    line = _refused(run_cli("up", "--port", "0", env=env, timeout=REFUSAL_TIMEOUT_S), tmp_path / "state")
    assert "no-codex" in line and "codex.bin" in line, line


def test_run_without_codex_refuses_in_one_line_instead_of_waiting(tmp_path: Path):
    env = isolated(tmp_path, PATH=NO_CODEX_PATH, BOSS_SERVER_URL="http://127.0.0.1:9")
    line = _refused(run_cli("run", env=env, timeout=REFUSAL_TIMEOUT_S), tmp_path / "state")
    assert PINNED_INSTALL in line, line


def test_the_codex_the_scripts_recorded_is_the_one_the_commands_use(tmp_path: Path, codex_bin: str):
    env = isolated(tmp_path, PATH=NO_CODEX_PATH)
    record_installed_codex(tmp_path / "state", codex_bin)
    done = run_cli("status", "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["codexVersion"] == PINNED_CODEX_VERSION


def test_codex_bin_still_wins_over_the_recorded_codex(tmp_path: Path, codex_bin: str):
    record_installed_codex(tmp_path / "state", codex_bin)
    env = isolated(tmp_path, PATH=NO_CODEX_PATH, BOSS_CODEX_BIN=str(tmp_path / "no-codex"))
    line = _refused(run_cli("up", "--port", "0", env=env, timeout=REFUSAL_TIMEOUT_S), tmp_path / "state")
    assert "no-codex" in line, line


def test_doctors_fix_for_a_missing_codex_names_the_pinned_version(tmp_path: Path):
    done = run_cli("doctor", "--json", env=isolated(tmp_path, PATH=NO_CODEX_PATH))
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert checks["codex"]["result"] == "fail"
    assert checks["codex"]["fix"].startswith(PINNED_INSTALL), checks["codex"]
