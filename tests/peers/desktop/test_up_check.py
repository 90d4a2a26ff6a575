"""``scripts/up.sh --check`` on a machine with a desktop: the real script, against this
checkout's already-installed venv and codex, offers computer use and starts nothing."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from boss_agent.codexbin import INSTALLED_CODEX_FILE
from tests.conftest import REPO
from tests.peers.codex.test_doctor import base_env
from tests.peers.desktop.test_runner_cua import desktop  # noqa: F401 - the Xvfb + openbox fixture

pytestmark = [pytest.mark.codex, pytest.mark.desktop]
UP_CHECK_TIMEOUT_S = 120.0  # everything is installed: the script only checks, then doctor runs (seconds)


async def test_up_check_installs_nothing_new_and_offers_computer_use_on_a_desktop(
        tmp_path: Path, desktop: dict[str, str]) -> None:  # noqa: F811 - the imported fixture
    env = base_env(tmp_path, DISPLAY=desktop["DISPLAY"])
    stamps = sorted(p.name for p in (REPO / ".venv").glob(".installed-*"))
    proc = await asyncio.create_subprocess_exec(
        "bash", str(REPO / "scripts" / "up.sh"), "--check", cwd=tmp_path, env=env,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out_b, err_b = await asyncio.wait_for(proc.communicate(), UP_CHECK_TIMEOUT_S)
    out, err = out_b.decode(), err_b.decode()
    # No codex login in this HOME: up would start the demo (and the check started nothing).
    assert f"would run: {REPO / '.venv' / 'bin' / 'boss-agent'} up --demo" in out, (out, err)
    assert re.search(r"^\[ok  \] desktop: .*cua-driver.*" + re.escape(desktop["DISPLAY"]), out, re.M), out
    assert "installing" not in err, err  # idempotent: the venv already had the cua extra
    assert sorted(p.name for p in (REPO / ".venv").glob(".installed-*")) == stamps
    assert proc.returncode == 0, out  # doctor: warnings only (no login, not paired), no failure
    # Nothing was started: the state dir holds at most the record of the installed codex.
    state = tmp_path / "state"
    assert not state.exists() or {p.name for p in state.iterdir()} <= {INSTALLED_CODEX_FILE}, list(state.iterdir())
