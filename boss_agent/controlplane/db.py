"""The control plane's SQLite database: connection, schema, transactions, time.

Every query runs synchronously on the event loop's thread: the database is a local
file, each statement is tiny, and one connection on one thread means no two
handlers ever interleave inside a transaction. Transactions still open with
``BEGIN IMMEDIATE`` so that a second process on the same file (two `devserver`s by
mistake) cannot hand one task to two devices either.

Times are stored as float epoch seconds and leave as ISO-8601 UTC strings.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from boss_agent.identity import owner_only, private_dir
from boss_agent.timefmt import utc_iso

BUSY_TIMEOUT_MS = 5000  # another process holding the write lock gets this long before we fail

SCHEMA = """
CREATE TABLE IF NOT EXISTS pairing_codes (
    code        TEXT PRIMARY KEY,
    created_at  REAL NOT NULL,
    expires_at  REAL NOT NULL,
    used_by     TEXT
);
CREATE TABLE IF NOT EXISTS devices (
    device_id          TEXT PRIMARY KEY,
    token_hash         TEXT NOT NULL UNIQUE,
    info               TEXT NOT NULL,
    paired_at          REAL NOT NULL,
    revoked_at         REAL,
    last_heartbeat_at  REAL,
    heartbeat          TEXT
);
CREATE TABLE IF NOT EXISTS tasks (
    position          INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id           TEXT NOT NULL UNIQUE,
    spec              TEXT NOT NULL,
    status            TEXT NOT NULL,
    attempt           INTEGER NOT NULL DEFAULT 1,
    device_id         TEXT,
    lease_expires_at  REAL,
    cancel_requested  INTEGER NOT NULL DEFAULT 0,
    seq               INTEGER,
    card              TEXT,
    refs              TEXT,
    result            TEXT,
    created_at        REAL NOT NULL,
    updated_at        REAL NOT NULL,
    claimed_at        REAL,
    completed_at      REAL
);
CREATE INDEX IF NOT EXISTS tasks_by_status ON tasks (status, position);
CREATE TABLE IF NOT EXISTS approvals (
    task_id     TEXT NOT NULL,
    approval_id TEXT NOT NULL,
    request     TEXT NOT NULL,
    status      TEXT NOT NULL,
    decision    TEXT,
    created_at  REAL NOT NULL,
    decided_at  REAL,
    PRIMARY KEY (task_id, approval_id)
);
CREATE TABLE IF NOT EXISTS phone_codes (
    code_hash   TEXT PRIMARY KEY,
    created_at  REAL NOT NULL,
    expires_at  REAL NOT NULL,
    used_at     REAL
);
CREATE TABLE IF NOT EXISTS phones (
    phone_id      TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    token_hash    TEXT NOT NULL UNIQUE,
    created_at    REAL NOT NULL,
    last_seen_at  REAL,
    revoked_at    REAL
);
"""
# Columns added after the first release: (table, column, definition). A database made by
# an older version gets them on open; CREATE TABLE IF NOT EXISTS would not add them.
COLUMNS = (
    ("approvals", "archived", "INTEGER NOT NULL DEFAULT 0"),  # an earlier attempt's approval
    ("approvals", "withdraw_reason", "TEXT"),
    ("tasks", "refs", "TEXT"),  # the live codexThreadRef and turnId from progress uploads
)


def iso(ts: float | None) -> str | None:
    """Epoch seconds as the API's ISO-8601 UTC string."""
    if ts is None:
        return None
    return utc_iso(ts)


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


class Database:
    """One SQLite connection plus the clock every query reads."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.time) -> None:
        private_dir(path.parent)
        self.clock = clock
        # Prompts, cards and pairing codes live here and in the -wal/-shm files beside
        # it. SQLite gives those the database file's mode, but creates them on first
        # use; an older run may have left them group-readable, so tighten all three.
        for existing in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            if existing.exists():
                existing.chmod(0o600)
        with owner_only():
            # isolation_level=None: no implicit transactions; we say BEGIN ourselves.
            self.conn = sqlite3.connect(str(path), isolation_level=None)
            self.conn.row_factory = sqlite3.Row
            self.conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self.conn.execute("PRAGMA journal_mode = WAL")
            self.conn.execute("PRAGMA foreign_keys = ON")
            self.conn.executescript(SCHEMA)
            self._add_columns()

    def _add_columns(self) -> None:
        for table, column, definition in COLUMNS:
            names = {row["name"] for row in self.conn.execute(f"PRAGMA table_info({table})")}
            if column not in names:
                self.conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")

    def close(self) -> None:
        self.conn.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that takes the database's write lock up front."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def one(self, sql: str, *args: Any) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self.conn.execute(sql, args).fetchone()
        return row

    def all(self, sql: str, *args: Any) -> list[sqlite3.Row]:
        return self.conn.execute(sql, args).fetchall()
