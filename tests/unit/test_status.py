"""`boss-agent status`: read from the state dir's files, without the daemon, fast, no leaks.

The daemon's side is played by the real pieces it uses: ``save_identity`` for
pairing, ``write_state`` for the state file, ``CompletionSpool`` for spooled
reports, ``InstanceLock`` for "running" (held by this test process, so the pid it
names is alive). The CLI tests run a real `python -m boss_agent` process.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from boss_agent.identity import Identity, save_identity
from boss_agent.daemon.process import InstanceLock
from boss_agent.sources.boss.spool import CompletionSpool
from boss_agent.daemon.statefile import write_state
from boss_agent.timefmt import utc_now
from boss_agent.cli.status import collect_status
from boss_agent.tasks import TaskResult
from tests.support.config import NO_CODEX, make_config
from tests.support.cli import cli_env, invoke

CLI_TIMEOUT_S = 60
TOKEN = "bdt_secret_token_0123456789abcdef"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def pair(state_dir: Path, device_id: str = "dev_1") -> Identity:
    identity = Identity("http://127.0.0.1:9/", device_id, TOKEN)
    save_identity(state_dir, identity)
    return identity


def test_the_codex_version_comes_from_the_state_file_without_running_codex(home: Path) -> None:
    config = make_config(home, NO_CODEX)  # a codex that does not exist: running it would fail
    write_state(config.state_dir, {"codex_version": "0.171.0", "codex_transport": "stdio"})
    data = collect_status(config)
    assert data["codexVersion"] == "0.171.0"
    assert "codexError" not in data


def test_a_running_daemon_shows_its_pid_tasks_heartbeat_and_spool(home: Path) -> None:
    config = make_config(home, NO_CODEX)
    identity = pair(config.state_dir)
    spool = CompletionSpool(config.state_dir)
    for task_id in ("tsk_1", "tsk_2"):
        spool.put_result(task_id, TaskResult(status="completed", backend="app_server"))
    write_state(config.state_dir, {
        "paired": True, "device_id": identity.device_id, "running_task_ids": ["tsk_3"],
        "last_heartbeat_at": utc_now(), "last_heartbeat_result": "ok", "state": "running",
        "started_at": utc_now(), "codex_version": "0.171.0"})
    with InstanceLock(config.state_dir):
        data = collect_status(config)
    assert data["paired"] is True and data["unpaired"] is False
    assert data["deviceId"] == "dev_1" and data["server"] == "http://127.0.0.1:9/"
    assert data["daemonRunning"] is True and data["daemonPid"] == os.getpid()
    assert data["runningTaskIds"] == ["tsk_3"] and data["runningTasks"] == 1
    assert data["spooledReports"] == 2
    assert data["lastHeartbeatResult"] == "ok" and data["lastHeartbeatAgeS"] is not None


def test_a_stopped_daemons_last_state_is_not_reported_as_running(home: Path) -> None:
    config = make_config(home, NO_CODEX)
    pair(config.state_dir)
    write_state(config.state_dir, {"running_task_ids": ["tsk_3"], "state": "running",
                                   "codex_version": "0.171.0"})
    data = collect_status(config)
    assert data["daemonRunning"] is False and data["daemonPid"] is None
    assert data["runningTaskIds"] == [] and data["daemonState"] == "stopped"


def test_a_token_the_server_revoked_shows_unpaired_until_the_device_pairs_again(home: Path) -> None:
    config = make_config(home, NO_CODEX)
    pair(config.state_dir, "dev_old")
    write_state(config.state_dir, {"paired": False, "unpaired": True, "device_id": "dev_old",
                                   "last_heartbeat_result": "unauthorized", "codex_version": "0.171.0"})
    revoked = collect_status(config)
    assert revoked["paired"] is False and revoked["unpaired"] is True
    pair(config.state_dir, "dev_new")
    again = collect_status(config)
    assert again["paired"] is True and again["unpaired"] is False


def test_status_never_shows_the_token_or_the_home_path(home: Path) -> None:
    config = make_config(home, NO_CODEX)
    save_identity(config.state_dir, Identity(f"https://kris:{TOKEN}@boss.example.com", "dev_1", TOKEN))
    write_state(config.state_dir, {"codex_version": "0.171.0"})
    text = json.dumps(collect_status(config))
    assert TOKEN not in text and str(home) not in text
    assert "~/state" in text


def test_a_damaged_identity_is_reported_not_raised(home: Path) -> None:
    config = make_config(home, NO_CODEX)
    pair(config.state_dir)
    (config.state_dir / "device.json").write_text("{not json")
    write_state(config.state_dir, {"codex_version": "0.171.0"})
    data = collect_status(config)
    assert data["paired"] is False and "pair again" in data["identityError"]


def test_status_on_the_command_line_prints_lines_and_json(home: Path) -> None:
    config = make_config(home, NO_CODEX)
    pair(config.state_dir)
    write_state(config.state_dir, {"codex_version": "0.171.0", "codex_transport": "stdio"})
    env = cli_env(home, BOSS_STATE_DIR=str(config.state_dir), BOSS_CODEX_BIN="/nonexistent")
    text = invoke("status", env=env)
    assert text.exit_code == 0, text.output
    lines = dict(line.split(None, 1) for line in text.stdout.splitlines())
    assert lines["paired"] == "yes" and lines["daemonRunning"] == "no"
    assert lines["codexVersion"] == "0.171.0"
    raw = invoke("status", "--json", env=env)
    assert json.loads(raw.stdout)["deviceId"] == "dev_1"
    assert TOKEN not in text.stdout + raw.stdout
