"""Files the control plane and the daemon create are 0600 inside 0700 directories.

They hold prompts, cards, pairing codes, tokens and log lines. The umask of the test
process is set to the common 022 first, so a file created with default permissions
shows up as 0644 and fails.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from boss_agent.controlplane.db import Database
from boss_agent.identity import ensure_state_dir
from boss_agent.logs import remove_handlers, setup_logging


@pytest.fixture(autouse=True)
def common_umask() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_database_and_its_wal_and_shm_are_owner_only(tmp_path: Path):
    path = tmp_path / "state" / "controlplane" / "controlplane.db"
    db = Database(path)
    try:
        with db.transaction() as conn:
            conn.execute("INSERT INTO pairing_codes (code, created_at, expires_at) VALUES ('123456', 0, 1)")
        files = [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]
        assert all(f.exists() for f in files), files
        assert {f.name: mode(f) for f in files} == {f.name: 0o600 for f in files}
        assert mode(path.parent) == 0o700
    finally:
        db.close()


def test_an_existing_group_readable_database_and_directory_are_tightened(tmp_path: Path):
    directory = tmp_path / "cp"
    directory.mkdir(mode=0o755)
    path = directory / "controlplane.db"
    Database(path).close()
    for suffix in ("-wal", "-shm"):
        path.with_name(path.name + suffix).touch(mode=0o644)
    path.chmod(0o644)
    db = Database(path)
    try:
        with db.transaction() as conn:
            conn.execute("INSERT INTO pairing_codes (code, created_at, expires_at) VALUES ('123456', 0, 1)")
        assert mode(directory) == 0o700
        for f in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            assert mode(f) == 0o600, f
    finally:
        db.close()


def test_the_state_dir_is_owner_only_even_when_it_existed(tmp_path: Path):
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    ensure_state_dir(state)
    assert mode(state) == 0o700


def test_the_log_file_is_owner_only(tmp_path: Path):
    log_dir = tmp_path / "state" / "logs"
    setup_logging("info", log_dir, json_lines=True)
    try:
        logging.getLogger("boss_agent.test").info("a line")
        assert mode(log_dir / "boss-agent.log") == 0o600 and mode(log_dir) == 0o700
    finally:
        remove_handlers()
