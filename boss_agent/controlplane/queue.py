"""The task queue: submit, claim with leases, progress, complete, cancel, approvals.

Task lifecycle on the control plane (``status``): the table ``lifecycles.QUEUE``
(``QueueStatus``), which every status change here goes through. A task is claimed
(``queued`` → ``running``), completed by its device (``completed``, ``failed`` or
``cancelled``), cancelled before any device took it, or ``abandoned`` when its lease
runs out or its device is revoked; an abandoned or failed task may be retried
(``queued`` again, attempt + 1). The SQL below names statuses only as parameters
from the enum, never as literals.

Leases. A claim gives the device a lease of ``lease_s`` seconds on the task. The
lease is renewed by a heartbeat that lists the task in ``runningTaskIds``, by a
progress upload, and by creating or polling one of its approvals. A running task
whose lease runs out is marked ``abandoned``: it is *not* requeued on its own,
because a half-run Codex turn may have edited files and running it again blindly
could do the work twice. The page shows it, and the user can requeue it
(``retry``: attempt + 1). The owner may still deliver its ``complete`` for an
abandoned task (a late result beats none); any other call on it gets 409, which
tells the device to stop.

Approvals are stored by ``approvals.py``; this module only checks that the device
calling owns the task, and that a decision still has a running task to go to.

Claims select and update in one ``BEGIN IMMEDIATE`` transaction, guarded by
``status = queued``, so one task never goes to two devices. A steer task
(``targetCodexTurnId`` set) joins a turn already running and so takes no slot: it
is handed over beyond ``slots``, even at ``slots: 0``, and only to the device whose
running task reported that turn (any device while nobody has reported it).
"""

from __future__ import annotations

import secrets
from collections import Counter
from typing import Any

from boss_agent.controlplane.approval_store import Approvals
from boss_agent.controlplane.db import Database, dumps, iso, loads
from boss_agent.errors import ControlPlaneError, TaskRejected
from boss_agent.lifecycles import QUEUE, QUEUE_FINISHED, QueueStatus
from boss_agent.redact import sanitize_text
from boss_agent.tasks import parse_task

TASK_FIELDS = (
    "intentCategory", "projectId", "workdir", "codexThreadRef", "sourceCodexThreadRef",
    "targetCodexThreadRef", "targetCodexTurnId", "model", "approvalMode", "approvalPolicy", "sandbox",
    "collaborationMode",
)
TASK_DEFAULTS = {"intentCategory": "conversation_reply", "approvalMode": "remote"}
FINISHED = QUEUE_FINISHED  # the queue's own end (a lease that ran out included)
Q = QueueStatus
RETRYABLE = frozenset(s for s in Q if QUEUE.moves_to(s, Q.QUEUED))  # retry(): abandoned, failed
RESULT_KEYS = ("status", "backend", "fallbackFrom", "codexThreadRef", "turnId", "resultText", "error")


# Queued steer tasks this device may take: none whose turn runs on another device.
STEER_CLAIM_SQL = """
SELECT * FROM tasks AS q WHERE q.status = :queued
  AND json_extract(q.spec, '$.targetCodexTurnId') IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM tasks AS r WHERE r.status = :running AND r.device_id != :device
                  AND json_extract(r.refs, '$.turnId') = json_extract(q.spec, '$.targetCodexTurnId'))
ORDER BY q.position
"""


# The running tasks that hold a slot (a steer joins a running turn and holds none).
SLOT_HOLDERS_SQL = ("SELECT task_id, device_id FROM tasks WHERE status = ?"
                    " AND json_extract(spec, '$.targetCodexTurnId') IS NULL")
SLOT_FREES = "this one starts when a slot frees"


def _tasks(n: int) -> str:
    return f"{n} task is" if n == 1 else f"{n} tasks are"


def describe_wait(running: int, asking: int) -> str:
    """The reason a queued task gives while ``running`` tasks (``asking`` of them waiting
    on an approval) hold every slot."""
    if running == 0:
        return f"every slot of the device is busy; {SLOT_FREES}"
    if asking == running:
        return f"{_tasks(running)} waiting on your approval; {SLOT_FREES}"
    if asking == 0:
        return f"{_tasks(running)} running; {SLOT_FREES}"
    return f"{_tasks(running)} running ({asking} waiting on your approval); {SLOT_FREES}"


def _not_found() -> ControlPlaneError:
    return ControlPlaneError(404, "task_not_found", "no such task")


def _not_owned(why: str) -> ControlPlaneError:
    return ControlPlaneError(409, "task_not_owned", why)


TITLE_CHARS = 120  # a card heading, not the prompt


def task_title(prompt: str) -> str:
    """The prompt's first line, masked like everything else shown: a secret a user
    pasted into a prompt must not sit on a screen that others may look at."""
    return sanitize_text(prompt.strip().split("\n", 1)[0], limit=TITLE_CHARS)


class TaskQueue:
    def __init__(self, db: Database, lease_s: float) -> None:
        self.db = db
        self.lease_s = lease_s
        self.approvals = Approvals(db)

    # -- submitting and reading -------------------------------------------------

    def submit(self, prompt: str, fields: dict[str, Any]) -> str:
        unknown = sorted(set(fields) - set(TASK_FIELDS))
        if unknown:
            raise ControlPlaneError(400, "invalid_task", f"unknown task field {unknown[0]!r}")
        spec = {key: fields.get(key, TASK_DEFAULTS.get(key)) for key in TASK_FIELDS}
        spec["prompt"] = prompt
        try:
            parse_task({"taskId": "tsk_validate", **spec})
        except TaskRejected as exc:
            raise ControlPlaneError(400, exc.code, str(exc)) from exc
        task_id = "tsk_" + secrets.token_hex(8)
        now = self.db.clock()
        self.db.conn.execute(
            "INSERT INTO tasks (task_id, spec, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
            (task_id, dumps(spec), Q.QUEUED, now, now),
        )
        return task_id

    def _row(self, task_id: str) -> Any:
        row = self.db.one("SELECT * FROM tasks WHERE task_id = ?", task_id)
        if row is None:
            raise _not_found()
        return row

    def task(self, task_id: str) -> dict[str, Any]:
        return self._view(self._row(task_id), self.wait_reason())

    def tasks(self, limit: int = 200) -> list[dict[str, Any]]:
        rows = self.db.all("SELECT * FROM tasks ORDER BY position DESC LIMIT ?", limit)
        reason = self.wait_reason()
        return [self._view(row, reason) for row in rows]

    def queued(self) -> list[dict[str, Any]]:
        """The views of the queued tasks, oldest first."""
        rows = self.db.all("SELECT * FROM tasks WHERE status = ? ORDER BY position", Q.QUEUED)
        reason = self.wait_reason()
        return [self._view(row, reason) for row in rows]

    def wait_reason(self) -> str | None:
        """Why a queued task has not started: every slot of every live device is held; else None.

        A device's slots are what its last heartbeat (within a lease) says it runs at once,
        held by the tasks this control plane gave it or, if more, by the tasks it says it
        runs. No live device, or one with a free slot, is no reason to give.
        """
        since = self.db.clock() - self.lease_s
        devices = self.db.all("SELECT device_id, heartbeat FROM devices WHERE revoked_at IS NULL"
                              " AND heartbeat IS NOT NULL AND last_heartbeat_at >= ?", since)
        if not devices:
            return None
        running = self.db.all(SLOT_HOLDERS_SQL, Q.RUNNING)
        held = Counter(row["device_id"] for row in running)
        for device in devices:
            beat = loads(device["heartbeat"]) or {}
            slots = beat.get("maxConcurrentTasks")
            busy = max(held[device["device_id"]], len(beat.get("runningTaskIds") or []))
            if not isinstance(slots, int) or busy < slots:
                return None
        ids = [row["task_id"] for row in running]
        marks = ",".join("?" * len(ids))
        counted = self.db.one(f"SELECT COUNT(DISTINCT task_id) AS n FROM approvals WHERE status = 'pending'"
                              f" AND archived = 0 AND task_id IN ({marks})", *ids) if ids else None
        return describe_wait(len(ids), counted["n"] if counted is not None else 0)

    def _view(self, row: Any, wait_reason: str | None = None) -> dict[str, Any]:
        """The task as the local API and the page show it (the page uses ``title``).

        ``codexThreadRef``/``turnId``: the thread and turn the task ran on, live from its
        progress uploads, then from its result (a follow-up or a steer names them).
        """
        spec = loads(row["spec"])
        live = loads(row["refs"]) or {}
        result = loads(row["result"]) or {}
        return {
            "taskId": row["task_id"],
            "status": row["status"],
            "attempt": row["attempt"],
            "deviceId": row["device_id"],
            "leaseExpiresAt": iso(row["lease_expires_at"]) if row["status"] == Q.RUNNING else None,
            "cancelRequested": bool(row["cancel_requested"]),
            "seq": row["seq"],
            "executionProgress": loads(row["card"]),
            "result": loads(row["result"]),
            "approvals": self.approvals.for_task(row["task_id"]),
            "createdAt": iso(row["created_at"]),
            "updatedAt": iso(row["updated_at"]),
            "claimedAt": iso(row["claimed_at"]),
            "completedAt": iso(row["completed_at"]),
            "title": task_title(spec.get("prompt", "")),
            "codexThreadRef": result.get("codexThreadRef") or live.get("codexThreadRef")
            or spec.get("codexThreadRef"),
            "turnId": result.get("turnId") or live.get("turnId"),
            # Why it has not started (queued, not a steer, every slot held), else None.
            "waitReason": wait_reason if row["status"] == Q.QUEUED and not spec.get("targetCodexTurnId") else None,
            "task": spec,
        }

    # -- the device side ------------------------------------------------------

    def claim(self, device_id: str, slots: int) -> list[dict[str, Any]]:
        """Hand up to ``slots`` queued tasks to ``device_id``, oldest first."""
        now = self.db.clock()
        claimed = []
        with self.db.transaction() as conn:
            rows = conn.execute(STEER_CLAIM_SQL, {"queued": Q.QUEUED, "running": Q.RUNNING,
                                                  "device": device_id}).fetchall()
            rows += conn.execute(
                "SELECT * FROM tasks WHERE status = ? AND json_extract(spec, '$.targetCodexTurnId')"
                " IS NULL ORDER BY position LIMIT ?", (Q.QUEUED, slots)
            ).fetchall()
            for row in rows:
                conn.execute(
                    "UPDATE tasks SET status = ?, device_id = ?, lease_expires_at = ?, claimed_at = ?,"
                    " updated_at = ? WHERE task_id = ? AND status = ?",
                    (QUEUE.check(row["status"], Q.RUNNING), device_id, now + self.lease_s, now, now,
                     row["task_id"], Q.QUEUED),
                )
                claimed.append(self._wire_task(row))
        return claimed

    def _wire_task(self, row: Any) -> dict[str, Any]:
        return {"taskId": row["task_id"], "attempt": row["attempt"], **loads(row["spec"]),
                "createdAt": iso(row["created_at"])}

    def _owned(self, device_id: str, task_id: str) -> Any:
        row = self._row(task_id)
        if row["device_id"] != device_id:
            raise _not_owned("the task is not claimed by this device")
        if row["status"] != Q.RUNNING:
            raise _not_owned(f"the task is {row['status']}")
        return row

    def _renew(self, task_id: str) -> None:
        now = self.db.clock()
        self.db.conn.execute(
            "UPDATE tasks SET lease_expires_at = ? WHERE task_id = ? AND status = ?",
            (now + self.lease_s, task_id, Q.RUNNING),
        )

    def renew_leases(self, device_id: str, task_ids: list[str]) -> None:
        for task_id in task_ids:
            self.db.conn.execute(
                "UPDATE tasks SET lease_expires_at = ? WHERE task_id = ? AND device_id = ? AND status = ?",
                (self.db.clock() + self.lease_s, task_id, device_id, Q.RUNNING),
            )

    def cancel_ids(self, device_id: str) -> list[str]:
        rows = self.db.all(
            "SELECT task_id FROM tasks WHERE device_id = ? AND status = ? AND cancel_requested = 1"
            " ORDER BY position", device_id, Q.RUNNING,
        )
        return [row["task_id"] for row in rows]

    def progress(self, device_id: str, task_id: str, seq: int, card: dict[str, Any],
                 refs: dict[str, str] | None = None) -> bool:
        """Keep the card (and live refs) of the highest ``seq``; return whether a cancel was requested."""
        row = self._owned(device_id, task_id)
        now = self.db.clock()
        with self.db.transaction() as conn:  # the card and the lease: one commit, one fsync
            conn.execute(
                "UPDATE tasks SET card = ?, seq = ?, refs = COALESCE(?, refs), updated_at = ?"
                " WHERE task_id = ? AND (seq IS NULL OR seq < ?)",
                (dumps(card), seq, dumps(refs) if refs else None, now, task_id, seq),
            )
            self._renew(task_id)
        return bool(row["cancel_requested"])

    def complete(self, device_id: str, task_id: str, body: dict[str, Any]) -> bool:
        """Record the result; False when it was already recorded (an idempotent repeat)."""
        row = self._row(task_id)
        if row["device_id"] != device_id:
            raise _not_owned("the task is not claimed by this device")
        if row["result"] is not None:
            return False
        if not QUEUE.moves_to(row["status"], body["status"]):  # running or abandoned, to an end
            raise _not_owned(f"the task is {row['status']}")
        now = self.db.clock()
        card = body.get("executionProgress") or loads(row["card"])
        self.db.conn.execute(
            "UPDATE tasks SET status = ?, result = ?, card = ?, completed_at = ?, updated_at = ?,"
            " lease_expires_at = NULL WHERE task_id = ?",
            (body["status"], dumps({k: body.get(k) for k in RESULT_KEYS}), dumps(card) if card else None,
             now, now, task_id),
        )
        return True

    # -- the user side ----------------------------------------------------------

    def request_cancel(self, task_id: str) -> str:
        """Cancel a queued task now, or ask its device to; return the new status."""
        row = self._row(task_id)
        now = self.db.clock()
        if row["status"] == Q.QUEUED:
            self.db.conn.execute(
                "UPDATE tasks SET status = ?, completed_at = ?, updated_at = ?"
                " WHERE task_id = ? AND status = ?",
                (QUEUE.check(row["status"], Q.CANCELLED), now, now, task_id, Q.QUEUED))
            return Q.CANCELLED
        if row["status"] == Q.RUNNING:  # its device cancels it; the status follows its `complete`
            self.db.conn.execute(
                "UPDATE tasks SET cancel_requested = 1, updated_at = ? WHERE task_id = ?", (now, task_id))
            return Q.RUNNING
        raise ControlPlaneError(409, "task_finished", f"the task is already {row['status']}")

    def retry(self, task_id: str) -> None:
        """Requeue an abandoned or failed task as a new attempt."""
        row = self._row(task_id)
        if row["status"] not in RETRYABLE:  # the table's moves to queued
            raise ControlPlaneError(409, "task_not_retryable", f"the task is {row['status']}")
        self.db.conn.execute(
            "UPDATE tasks SET status = ?, attempt = attempt + 1, device_id = NULL,"
            " lease_expires_at = NULL, cancel_requested = 0, seq = NULL, card = NULL, result = NULL,"
            " claimed_at = NULL, completed_at = NULL, updated_at = ? WHERE task_id = ?",
            (Q.QUEUED, self.db.clock(), task_id),
        )
        self.approvals.archive(task_id)

    def expire_leases(self, device_id: str | None = None) -> list[str]:
        """Abandon running tasks whose lease ran out (or all of ``device_id``'s)."""
        now = self.db.clock()
        with self.db.transaction() as conn:
            args: tuple[float | str, ...]
            if device_id is None:
                where, args = "lease_expires_at < ?", (now,)
            else:
                where, args = "device_id = ?", (device_id,)
            rows = conn.execute(f"SELECT task_id, status FROM tasks WHERE status = ? AND {where}",
                                (Q.RUNNING, *args)).fetchall()
            ids = [row["task_id"] for row in rows]
            for row in rows:
                conn.execute(
                    "UPDATE tasks SET status = ?, completed_at = ?, updated_at = ?,"
                    " lease_expires_at = NULL WHERE task_id = ?",
                    (QUEUE.check(row["status"], Q.ABANDONED), now, now, row["task_id"]))
        return ids

    # -- approvals (stored by ``Approvals``; here only who may touch them) ---------------

    def create_approval(self, device_id: str, task_id: str, request: dict[str, Any]) -> bool:
        self._owned(device_id, task_id)
        # One commit, not two: each is an fsync, and Codex waits through this request.
        with self.db.transaction():
            self._renew(task_id)
            return self.approvals.create(task_id, request)

    def withdraw_approval(self, device_id: str, task_id: str, approval_id: str, reason: str) -> bool:
        # Not ``_owned``: a turn that ended may withdraw after its task was completed.
        if self._row(task_id)["device_id"] != device_id:
            raise _not_owned("the task is not claimed by this device")
        return self.approvals.withdraw(task_id, approval_id, reason)

    def poll_approval(self, device_id: str, task_id: str, approval_id: str) -> dict[str, Any]:
        row = self._row(task_id)
        if row["device_id"] != device_id:
            raise _not_owned("the task is not claimed by this device")
        approval = self.approvals.get(task_id, approval_id)
        if approval["status"] == "pending":
            # A device waiting on a person keeps its task. A poll that finds the answer
            # writes nothing (no fsync while Codex waits): the turn goes on at once and
            # its progress and heartbeats renew the lease from there.
            self._renew(task_id)
        return approval

    def decide(self, task_id: str, approval_id: str, decision: str | dict[str, Any]) -> None:
        status = self._row(task_id)["status"]
        current = self.approvals.get(task_id, approval_id)
        if status != Q.RUNNING and current["status"] == "pending":
            raise ControlPlaneError(409, "task_finished", f"the task is {status}")
        self.approvals.decide(task_id, approval_id, decision)
