"""The daemon's state file: atomic 0600 writes, an allow-list of keys, liveness from the lock."""

from __future__ import annotations

import json
import os
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from boss_agent.daemon.process import InstanceLock
from boss_agent.errors import StateError
from boss_agent.daemon.statefile import (
    STATE_FILE,
    StateWriter,
    daemon_running,
    read_state,
    status_snapshot,
    write_state,
)

SAMPLE = {
    "started_at": "2026-11-30T03:00:00Z",
    "paired": True,
    "server_url": "https://boss.example",
    "device_id": "dev_123",
    "codex_version": "0.171.0",
    "codex_transport": "stdio",
    "discovered_at": "2026-11-30T03:50:00Z",
    "running_task_ids": ["t1", "t2"],
    "spooled_reports": 1,
    "last_heartbeat_at": "2026-11-30T03:59:30Z",
    "last_heartbeat_result": "ok",
    "unpaired": False,
}


def test_written_state_reads_back_with_pid_and_updated_at(tmp_path: Path):
    written = write_state(tmp_path, SAMPLE)
    state = read_state(tmp_path)
    assert state == written
    assert state["pid"] == os.getpid()
    assert state["running_task_ids"] == ["t1", "t2"]
    assert state["updated_at"].endswith("Z")


def test_the_state_file_is_private_and_no_temp_file_is_left_behind(tmp_path: Path):
    write_state(tmp_path, SAMPLE)
    write_state(tmp_path, {**SAMPLE, "spooled_reports": 2})
    assert stat.S_IMODE((tmp_path / STATE_FILE).stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == [STATE_FILE]
    assert read_state(tmp_path)["spooled_reports"] == 2


def test_an_unknown_key_is_refused_and_nothing_is_written(tmp_path: Path):
    with pytest.raises(ValueError, match="device_token"):
        write_state(tmp_path, {**SAMPLE, "device_token": "bdt_secret"})
    assert read_state(tmp_path) is None


def test_credentials_in_a_string_value_are_masked(tmp_path: Path):
    write_state(tmp_path, {"server_url": "https://user:hunter2@boss.example/?token=abc"})
    text = (tmp_path / STATE_FILE).read_text()
    assert "hunter2" not in text and "abc" not in text
    assert "boss.example" in text


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", ""])
def test_an_unreadable_state_file_reads_as_none(tmp_path: Path, content: str):
    (tmp_path / STATE_FILE).write_text(content)
    assert read_state(tmp_path) is None


def test_no_state_file_reads_as_none(tmp_path: Path):
    assert read_state(tmp_path / "missing") is None


def test_the_daemon_counts_as_running_only_while_it_holds_the_lock(tmp_path: Path):
    write_state(tmp_path, SAMPLE)
    assert daemon_running(tmp_path) is None
    with InstanceLock(tmp_path):
        assert daemon_running(tmp_path) == os.getpid()
    assert daemon_running(tmp_path) is None


def test_status_of_a_running_daemon_shows_its_state_and_ages(tmp_path: Path):
    write_state(tmp_path, SAMPLE)
    now = datetime(2026, 11, 30, 4, 0, 0, tzinfo=UTC)
    with InstanceLock(tmp_path):
        snapshot = status_snapshot(tmp_path, now=now)
    assert snapshot["running"] is True and snapshot["daemon_pid"] == os.getpid()
    assert snapshot["running_task_ids"] == ["t1", "t2"]
    assert snapshot["uptime_s"] == 3600
    assert snapshot["discovery_age_s"] == 600
    assert snapshot["last_heartbeat_age_s"] == 30
    json.dumps(snapshot)  # `status --json` prints it as is


def test_status_after_a_crash_says_stopped_and_running_nothing(tmp_path: Path):
    write_state(tmp_path, {**SAMPLE, "state": "running"})
    snapshot = status_snapshot(tmp_path)
    assert snapshot["running"] is False and snapshot["daemon_pid"] is None
    assert snapshot["state"] == "stopped"
    assert snapshot["running_task_ids"] == []
    assert snapshot["device_id"] == "dev_123"  # the last known facts stay visible


class ManualClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_writer_rewrites_only_a_changed_state_or_a_stale_file(tmp_path: Path):
    """An idle daemon checks its state every few seconds; a disk write each time would be
    most of its idle CPU. Unchanged state is rewritten only every ``refresh_s``, so
    ``updated_at`` still shows a live daemon."""
    clock = ManualClock()
    writer = StateWriter(tmp_path, refresh_s=60.0, clock=clock)
    assert writer.write(SAMPLE) is True
    first = (tmp_path / STATE_FILE).stat().st_ino
    clock.now += 59.0
    assert writer.write(dict(SAMPLE)) is False  # equal, and not stale yet: no write
    assert (tmp_path / STATE_FILE).stat().st_ino == first
    assert writer.write({**SAMPLE, "running_task_ids": ["t1"]}) is True  # changed: written at once
    assert read_state(tmp_path)["running_task_ids"] == ["t1"]
    clock.now += 60.0
    assert writer.write({**SAMPLE, "running_task_ids": ["t1"]}) is True  # unchanged but stale
    assert writer.write({**SAMPLE, "running_task_ids": ["t1"]}, force=True) is True


def test_a_failed_write_is_retried_at_the_next_check(tmp_path: Path):
    writer = StateWriter(tmp_path / "file", refresh_s=60.0, clock=ManualClock())
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(StateError):
        writer.write(SAMPLE)
    (tmp_path / "file").unlink()
    assert writer.write(SAMPLE) is True
