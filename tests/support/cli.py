"""Running the ``boss-agent`` command line in tests: one environment, one subprocess helper.

``cli_env`` is the only environment a CLI subprocess gets: HOME and the XDG dirs under a
directory of the test's, an empty config file and a state dir of its own when asked
(``isolated``), and nothing of the outer ``BOSS_*``/``XDG_*``/``CODEX_*`` settings, so a test never
reads or writes the real user's config, state or credentials.

``run_cli`` / ``run_cli_async`` run ``python -m boss_agent …`` to completion with a
bound. Commands whose output is all a test looks at run in-process with
``typer.testing.CliRunner`` instead; a subprocess is for what only a process shows
(exit codes of the real entry point, signals, a daemon that outlives the call).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from typer.testing import CliRunner, Result

from boss_agent.cli.app import app
from boss_agent.cli.support import G

REPO = Path(__file__).resolve().parents[2]
# doctor and capabilities --refresh start codex and run discovery; most commands take < 2 s.
CLI_TIMEOUT_S = 90
CLI = (sys.executable, "-m", "boss_agent")
# Outer settings that could point a CLI at a real set-up (or at systemd's watchdog).
OUTER_PREFIXES = ("BOSS_", "XDG_", "CODEX_", "OPENAI_", "WATCHDOG_")


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a CLI subprocess: ``home`` is its HOME; nothing from outside leaks in."""
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(OUTER_PREFIXES) and k != "NOTIFY_SOCKET"}
    env.update({"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
                "XDG_STATE_HOME": str(home / ".local" / "state"), "PYTHONPATH": str(REPO)})
    env.update(extra)
    return env


def isolated(tmp: Path, **extra: str) -> dict[str, str]:
    """``cli_env`` with HOME at ``tmp/home``, an empty ``tmp/config.toml`` and state in ``tmp/state``."""
    (tmp / "config.toml").touch()
    return cli_env(tmp / "home", BOSS_AGENT_CONFIG=str(tmp / "config.toml"),
                   BOSS_STATE_DIR=str(tmp / "state"), **extra)


def run_cli(*args: str, env: dict[str, str], input: str | None = None, cwd: Path = REPO,
            timeout: float = CLI_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """``boss-agent *args`` in a subprocess, to completion; ``env`` from ``cli_env``/``isolated``."""
    return subprocess.run([*CLI, *args], input=input, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


async def run_cli_async(*args: str, env: dict[str, str], cwd: Path = REPO,
                        timeout: float = CLI_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """``run_cli`` that leaves the event loop free (for a control plane served by the test itself)."""
    proc = await asyncio.create_subprocess_exec(*CLI, *args, cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return subprocess.CompletedProcess([*CLI, *args], proc.returncode, out.decode(), err.decode())


def invoke(*args: str, env: dict[str, str]) -> Result:
    """``boss-agent *args`` in-process (typer's ``CliRunner``), seeing only ``env``'s settings.

    The outer ``BOSS_*``/``XDG_*``/``CODEX_*`` variables are unset for the call, as ``cli_env``
    leaves them out of a subprocess; the root options the call sets are put back after it.
    """
    hidden: dict[str, str | None] = {key: None for key in os.environ if key.startswith(OUTER_PREFIXES)}
    saved = G.config_path, G.debug
    try:
        return CliRunner().invoke(app, list(args), env={**hidden, **env})
    finally:
        G.config_path, G.debug = saved


async def run_doctor(env: dict[str, str]) -> tuple[int, dict[str, dict[str, Any]], str]:
    """``boss-agent doctor --json``: its exit code, its checks by name and its raw output."""
    done = await run_cli_async("doctor", "--json", env=env)
    assert "Traceback" not in done.stderr
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    return done.returncode, checks, done.stdout
