"""Durable task bookkeeping in the state dir: the completion spool and the running journal.

The spool (``state_dir/spool/<taskId>.json``) holds every ``complete`` body from the
moment the result exists until the server answered 2xx (device API §5: at least
once, across restarts). The journal (``state_dir/running/<taskId>.json``) names the
tasks that are running; an entry left behind by a dead daemon becomes a failed
``agent_restarted`` completion at the next start, so a task is never silently lost
and never run twice.

Ordering is what makes this crash-safe: a result is spooled *before* its journal
entry is removed, and an orphan is spooled *before* its journal entry is removed, so
a crash between the two steps leaves a duplicate the server deduplicates by taskId,
never a gap.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from boss_agent.identity import write_atomic
from boss_agent.tasks import TaskResult

logger = logging.getLogger(__name__)

SPOOL_DIR = "spool"
RUNNING_DIR = "running"
AGENT_RESTARTED = "agent_restarted"


def _file_name(task_id: str) -> str:
    # Plain ids (tsk_1) keep their name; anything else cannot escape the directory.
    return quote(task_id, safe="") + ".json"


class _Dir:
    """A directory of ``<taskId>.json`` records written atomically."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True, mode=0o700)

    def put(self, task_id: str, record: dict[str, Any]) -> None:
        write_atomic(self.path / _file_name(task_id), json.dumps(record).encode())

    def remove(self, task_id: str) -> None:
        (self.path / _file_name(task_id)).unlink(missing_ok=True)

    def __contains__(self, task_id: str) -> bool:
        return (self.path / _file_name(task_id)).exists()

    def ids(self) -> list[str]:
        files = sorted(self.path.glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
        return [unquote(p.name[: -len(".json")]) for p in files]

    def read(self, task_id: str) -> dict[str, Any] | None:
        try:
            record = json.loads((self.path / _file_name(task_id)).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            logger.warning("dropping an unreadable record in %s", self.path.name)
            self.remove(task_id)
            return None
        return record if isinstance(record, dict) else None


class CompletionSpool(_Dir):
    """``complete`` bodies waiting for a 2xx."""

    def __init__(self, state_dir: Path) -> None:
        super().__init__(state_dir / SPOOL_DIR)

    def put_result(self, task_id: str, result: TaskResult) -> None:
        self.put(task_id, result.to_wire())

    def pending(self) -> list[tuple[str, dict[str, Any]]]:
        """Oldest first, so results reach the server in the order they were made."""
        found = []
        for task_id in self.ids():
            body = self.read(task_id)
            if body is not None:
                found.append((task_id, body))
        return found

    def __len__(self) -> int:
        return len(self.ids())


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
