"""``boss-agent run`` starts the daemon without the CLI framework (cli/entry.py).

The daemon lives for days; typer (which builds pydantic adapters for the options it
parses), click and rich would stay in its memory all that time for parsing one word.
These run a real ``python -m boss_agent`` process and read which modules it imported
(``PYTHONPROFILEIMPORTTIME``); a stdio daemon does not load ``websockets`` either
(appserver/websocket.py is imported when dialing one). They also pin that the lean
start keeps the CLI's contract: the root options, one line and exit 2 for a bad
config, typer for everything else (which command lines take the lean start:
tests/unit/test_cli_lean_start.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path


from boss_agent.daemon.statefile import status_snapshot
from tests.support.waits import eventually

REPO = Path(__file__).resolve().parents[3]
START_S = 60.0  # an unpaired daemon is up in a second or two; a loaded 2-core box is slower
EXIT_S = 30.0
# typer vendors click (typer._click); a bare ``click`` line is httpx probing for its own CLI.
CLI_FRAMEWORK = ("typer", "pydantic", "pydantic_core", "rich", "shellingham")


def _env(tmp_path: Path, codex_bin: str | None = None) -> dict[str, str]:
    """``codex_bin``: a real one for a daemon that starts (it refuses without); never run unpaired."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("BOSS_")}
    (tmp_path / "config.toml").write_text("")
    return {**base, "HOME": str(tmp_path), "PYTHONPATH": str(REPO), "PYTHONPROFILEIMPORTTIME": "1",
            "BOSS_STATE_DIR": str(tmp_path / "state"), "BOSS_WORKSPACES": str(tmp_path),
            "BOSS_SERVER_URL": "http://127.0.0.1:9", "BOSS_CODEX_BIN": codex_bin or str(tmp_path / "no-codex")}


def _imported(stderr: str) -> set[str]:
    """Top-level package names from ``-X importtime`` lines (``import time: a | b | name``)."""
    return {line.rsplit("|", 1)[1].strip().split(".")[0]
            for line in stderr.splitlines() if line.startswith("import time:") and "|" in line}


def _waiting(tmp_path: Path, proc: subprocess.Popen[str]) -> bool:
    assert proc.poll() is None, "the daemon exited"
    return status_snapshot(tmp_path / "state")["state"] == "waiting for pairing"


async def test_the_running_daemon_never_imported_the_cli_framework_nor_websockets(
        tmp_path: Path, codex_bin: str) -> None:
    argv = [sys.executable, "-m", "boss_agent", "--config", str(tmp_path / "config.toml"), "run"]
    # To a file, not a pipe: the import profile alone can fill a pipe's buffer.
    with (tmp_path / "stderr.txt").open("w") as err:
        proc = subprocess.Popen(argv, cwd=REPO, env=_env(tmp_path, codex_bin),  # noqa: ASYNC220 - returns at once
                                stdout=subprocess.DEVNULL, stderr=err, text=True)
    try:
        await eventually(lambda: _waiting(tmp_path, proc), timeout=START_S)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=EXIT_S)
    stderr = (tmp_path / "stderr.txt").read_text()
    imported = _imported(stderr)
    assert "boss_agent" in imported and "asyncio" in imported  # the profile was read
    assert not imported & set(CLI_FRAMEWORK), sorted(imported & set(CLI_FRAMEWORK))
    assert "websockets" not in imported  # the default stdio transport has no use for it
    assert proc.returncode == 0


def _run_with_config(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    """The lean ``run`` start with a config file holding ``text``."""
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    env = {**_env(tmp_path), "PYTHONPROFILEIMPORTTIME": ""}
    return subprocess.run([sys.executable, "-m", "boss_agent", "--config", str(bad), "run"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=EXIT_S, check=False)


def test_a_bad_config_on_the_lean_start_is_still_one_line_and_exit_2(tmp_path: Path) -> None:
    done = _run_with_config(tmp_path, "[codex]\napp_server_transport = 'carrier-pigeon'\n")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("boss-agent: config error:"), done.stderr
    assert "Traceback" not in done.stderr


def test_a_bad_gateway_id_makes_run_exit_2_with_one_line(tmp_path: Path) -> None:
    done = _run_with_config(tmp_path, "[gateway]\nenabled = true\nworker_id = 'x y'\n")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "gateway.worker_id" in lines[0], done.stderr


def test_run_help_still_goes_through_typer(tmp_path: Path) -> None:
    env = {**_env(tmp_path), "PYTHONPROFILEIMPORTTIME": ""}
    done = subprocess.run([sys.executable, "-m", "boss_agent", "run", "--help"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=EXIT_S, check=False)
    assert done.returncode == 0 and "Run the daemon in the foreground" in done.stdout
