"""InstanceLock: one daemon per state dir, the refusal naming the holder's pid.

The cross-process refusal (a second daemon process) is in test_lifecycle_process.py;
flock also conflicts between two open descriptions in one process, which these use.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from boss_agent.errors import AlreadyRunning, StateError
from boss_agent.daemon.process import LOCK_FILE, InstanceLock, lock_holder


def test_a_second_acquisition_raises_already_running_with_the_holders_pid(tmp_path: Path):
    with InstanceLock(tmp_path):
        with pytest.raises(AlreadyRunning) as refused:
            InstanceLock(tmp_path).acquire()
    assert refused.value.pid == os.getpid()
    assert f"pid {os.getpid()}" in str(refused.value)


def test_the_lock_file_holds_our_pid_while_held_and_is_emptied_on_release(tmp_path: Path):
    lock = InstanceLock(tmp_path / "state")
    lock.acquire()
    path = tmp_path / "state" / LOCK_FILE
    assert path.read_text().strip() == str(os.getpid())
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert lock_holder(tmp_path / "state") == os.getpid()
    lock.release()
    assert path.read_text() == ""
    assert lock_holder(tmp_path / "state") is None


def test_after_release_another_instance_can_acquire(tmp_path: Path):
    with InstanceLock(tmp_path):
        pass
    with InstanceLock(tmp_path) as again:
        assert again.held


def test_a_stale_pid_left_by_a_crash_does_not_block_a_new_daemon(tmp_path: Path):
    (tmp_path / LOCK_FILE).write_text("999999\n")  # written, but nobody holds the flock
    assert lock_holder(tmp_path) is None
    with InstanceLock(tmp_path):
        assert (tmp_path / LOCK_FILE).read_text().strip() == str(os.getpid())


def test_a_lock_probe_does_not_stop_the_holder_from_keeping_the_lock(tmp_path: Path):
    with InstanceLock(tmp_path) as lock:
        for _ in range(3):
            assert lock_holder(tmp_path) == os.getpid()
        assert lock.held


def test_an_unusable_state_dir_is_a_state_error(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StateError):
        InstanceLock(blocker).acquire()
