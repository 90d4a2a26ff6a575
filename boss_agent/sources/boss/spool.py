"""Durable task bookkeeping in the state dir: the completion spool and the running journal.

The spool (``state_dir/spool/``) holds every ``complete`` body from the moment the
result exists until the server answered 2xx (device API §5: at least once, across
restarts). The journal (``state_dir/running/``) names the tasks that are running; an
entry left behind by a dead daemon becomes a failed ``agent_restarted`` completion at
the next start, so a task is never silently lost and never run twice.

Each record is a file named by the SHA-256 of its task id, holding
``{"taskId": …, "record": …}``: no id (long, non-ASCII, path-like) can make a name
the file system refuses or one that escapes the directory. Files an older version
wrote as ``quote(taskId).json`` (the bare record) are still read and removed.

A disk that refuses a write (ENOSPC, EROFS, EIO) never loses a record and never
raises: the record stays in memory (``unwritten``), is still delivered from there,
and ``retry_unwritten`` (driven with backoff by ``keep_written``) puts it on disk
once the disk takes writes again. ``degraded`` says so for status and doctor.

Ordering is what makes this crash-safe: a result is spooled *before* its journal
entry is removed, and an orphan is spooled *before* its journal entry is removed, so
a crash between the two steps leaves a duplicate the server deduplicates by taskId,
never a gap.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import random
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from boss_agent.identity import write_atomic
from boss_agent.tasks import TaskResult

logger = logging.getLogger(__name__)

SPOOL_DIR = "spool"
RUNNING_DIR = "running"
AGENT_RESTARTED = "agent_restarted"
NAME_MAX = 255  # the longest file name common Linux and macOS file systems accept
RETRY_FIRST_S = 1.0  # a full disk is rarely freed at once: start gently…
RETRY_MAX_S = 60.0  # …and never wait longer than a minute once space is back
_HASHED = re.compile(r"[0-9a-f]{64}\.json")


def record_name(task_id: str) -> str:
    """The file name of ``task_id``'s record."""
    return hashlib.sha256(task_id.encode("utf-8", "surrogatepass")).hexdigest() + ".json"


def _legacy_name(task_id: str) -> str | None:
    name = quote(task_id, safe="") + ".json"
    return name if len(name) <= NAME_MAX else None


class _Dir:
    """A directory of task records written atomically, with a memory overflow."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.unwritten: dict[str, dict[str, Any]] = {}  # the disk refused these, oldest first
        try:
            path.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            logger.error("cannot create %s (%s); records are kept in memory", path, exc.strerror)

    @property
    def degraded(self) -> bool:
        return bool(self.unwritten)

    def put(self, task_id: str, record: dict[str, Any]) -> bool:
        """Store ``record``; False when the disk refused it (it is then kept in memory)."""
        envelope = json.dumps({"taskId": task_id, "record": record}).encode()
        try:
            write_atomic(self.path / record_name(task_id), envelope)
        except OSError as exc:
            if not self.unwritten:
                logger.error("cannot write to %s (%s); keeping records in memory and retrying",
                             self.path, exc.strerror or type(exc).__name__)
            self.unwritten[task_id] = record
            return False
        self.unwritten.pop(task_id, None)
        return True

    def retry_unwritten(self) -> bool:
        """Try to put every record kept in memory on disk; True when none is left."""
        for task_id, record in list(self.unwritten.items()):
            if not self.put(task_id, record):
                return False
        logger.info("%s takes writes again; records kept in memory are on disk", self.path)
        return True

    def remove(self, task_id: str) -> None:
        self.unwritten.pop(task_id, None)
        for path in self._paths(task_id):
            try:
                path.unlink(missing_ok=True)
            except OSError as exc:
                logger.warning("cannot remove a record from %s (%s)", self.path, exc.strerror)

    def _paths(self, task_id: str) -> list[Path]:
        legacy = _legacy_name(task_id)
        return [self.path / record_name(task_id), *([self.path / legacy] if legacy else [])]

    def __contains__(self, task_id: str) -> bool:
        return task_id in self.unwritten or any(p.exists() for p in self._paths(task_id))

    def records(self) -> list[tuple[str, dict[str, Any]]]:
        """Every record, oldest first: the files, then those kept in memory."""
        found: dict[str, dict[str, Any]] = {}
        for path in self._files():
            entry = self._load(path)
            if entry is not None:
                found.setdefault(*entry)
        for task_id, record in self.unwritten.items():
            found[task_id] = record
        return list(found.items())

    def ids(self) -> list[str]:
        return [task_id for task_id, _ in self.records()]

    def read(self, task_id: str) -> dict[str, Any] | None:
        if task_id in self.unwritten:
            return self.unwritten[task_id]
        for path in self._paths(task_id):
            entry = self._load(path)
            if entry is not None:
                return entry[1]
        return None

    def _files(self) -> list[Path]:
        stamped = []
        for path in self.path.glob("*.json"):
            try:
                stamped.append((path.stat().st_mtime_ns, path))
            except OSError:  # removed meanwhile
                continue
        return [path for _, path in sorted(stamped)]

    def _load(self, path: Path) -> tuple[str, dict[str, Any]] | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            logger.warning("dropping an unreadable record in %s", self.path.name)
            path.unlink(missing_ok=True)
            return None
        if not _HASHED.fullmatch(path.name):  # an older version's quote(taskId).json
            return (unquote(path.name[: -len(".json")]), data) if isinstance(data, dict) else None
        if isinstance(data, dict) and isinstance(data.get("taskId"), str) \
                and isinstance(data.get("record"), dict):
            return data["taskId"], data["record"]
        return None


class CompletionSpool(_Dir):
    """``complete`` bodies waiting for a 2xx."""

    def __init__(self, state_dir: Path) -> None:
        super().__init__(state_dir / SPOOL_DIR)

    def put_result(self, task_id: str, result: TaskResult) -> None:
        self.put(task_id, result.to_wire())

    def pending(self) -> list[tuple[str, dict[str, Any]]]:
        """Oldest first, so results reach the server in the order they were made."""
        return self.records()

    def __len__(self) -> int:
        # Counted, not read: the state file asks every few seconds, the spool may be long.
        on_disk = {path.name for path in self._files()}
        return len(on_disk) + sum(1 for t in self.unwritten if record_name(t) not in on_disk)


class RunningJournal(_Dir):
    """The tasks this daemon has claimed and not yet spooled."""

    def __init__(self, state_dir: Path) -> None:
        super().__init__(state_dir / RUNNING_DIR)

    def add(self, task_id: str, attempt: int) -> None:
        self.put(task_id, {"taskId": task_id, "attempt": attempt})

    def recover(self, spool: CompletionSpool) -> list[str]:
        """Turn every entry a dead daemon left into a spooled ``agent_restarted`` failure."""
        orphans = self.ids()
        for task_id in orphans:
            if task_id not in spool:
                failed = TaskResult(status="failed", error_code=AGENT_RESTARTED,
                                    error_message="the agent restarted while the task was running")
                spool.put_result(task_id, failed)
            self.remove(task_id)
        if orphans:
            logger.warning("%d task(s) were running when the agent stopped; reported as failed",
                           len(orphans))
        return orphans


async def keep_written(*dirs: _Dir, first_s: float = RETRY_FIRST_S,
                       max_s: float = RETRY_MAX_S) -> None:
    """Forever: while a directory holds records in memory, retry writing them, with
    jittered exponential backoff; reset once every directory is on disk again."""
    delay = first_s
    while True:
        if any(d.degraded for d in dirs):
            await asyncio.sleep(delay * random.uniform(0.5, 1.0))
            done = all(d.retry_unwritten() for d in dirs if d.degraded)
            delay = first_s if done else min(delay * 2, max_s)
        else:
            await asyncio.sleep(first_s)
