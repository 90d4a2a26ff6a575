"""The lifecycles of boss-agent as data: each status is a ``StrEnum`` with a table of moves.

After h11's ``_state.py``: a status is an enum value, and a move the table does not
list is a bug that raises ``IllegalTransition`` (``errors.py``) where it happens,
instead of a card, a record or a status line quietly saying something impossible.
Staying in the same status is not a move and always allowed.
``tests/unit/test_lifecycles.py`` walks every table: every listed move is accepted,
every other pair is rejected.

    TaskStatus       one task as the card and the device API's ``complete`` spell it
    ExecutionStatus  the gateway's execution record (by-framework's upper-case spelling)
    SupervisorState  the codex app-server supervisor (``AppServer.status``)
    DaemonPhase      the daemon, as the state file and ``boss-agent status`` show it
    QueueStatus      one task in the embedded control plane's queue (``controlplane/queue.py``)

``TERMINAL`` is the one definition of "this task is over"; ``TERMINAL_EXECUTION`` is
the same set in the gateway's spelling, through ``EXECUTION_OF``, the one mapping
between the two wire spellings. The control plane's own queue adds ``abandoned`` (a
lease ran out) and lets an abandoned or failed task be queued again (``retry``).

A status is moved only through its table's ``check`` (or ``moves``): never assigned
directly, outside a constructor (``tests/unit/test_lifecycles.py`` reads the source
for such assignments).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Generic, TypeVar

from boss_agent.errors import IllegalTransition

S = TypeVar("S", bound=StrEnum)


class TaskStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    WAITING_APPROVAL = "waitingApproval"
    WAITING_INPUT = "waitingInput"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class ExecutionStatus(StrEnum):
    QUEUED = "QUEUED"  # written by the SDK client; the task has no worker yet
    RUNNING = "RUNNING"
    WAITING_USER = "WAITING_USER"  # suspended on an approval; the entry is acked
    CANCELLING = "CANCELLING"  # written by the SDK client's cancel_task
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


class SupervisorState(StrEnum):
    STARTING = "starting"
    UP = "up"
    RESTARTING = "restarting"
    DOWN = "down"
    STOPPED = "stopped"


class QueueStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"  # claimed: a device holds its lease
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    ABANDONED = "abandoned"  # its lease ran out (or its device was revoked); the user may retry


class DaemonPhase(StrEnum):
    STARTING = "starting"
    WAITING_FOR_PAIRING = "waiting for pairing"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"


TERMINAL: frozenset[TaskStatus] = frozenset(
    {TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED})
WAITING: frozenset[TaskStatus] = frozenset({TaskStatus.WAITING_APPROVAL, TaskStatus.WAITING_INPUT})
# Before the turn runs, or paused in it: a turn (re)starting makes the card ``running``.
NOT_YET_RUNNING: frozenset[TaskStatus] = frozenset({TaskStatus.QUEUED, *WAITING})

EXECUTION_OF: Mapping[str, ExecutionStatus] = {  # keyed by TaskStatus (a str)
    TaskStatus.QUEUED: ExecutionStatus.QUEUED,
    TaskStatus.RUNNING: ExecutionStatus.RUNNING,
    TaskStatus.WAITING_APPROVAL: ExecutionStatus.WAITING_USER,
    TaskStatus.WAITING_INPUT: ExecutionStatus.WAITING_USER,
    TaskStatus.COMPLETED: ExecutionStatus.COMPLETED,
    TaskStatus.FAILED: ExecutionStatus.FAILED,
    TaskStatus.CANCELLED: ExecutionStatus.CANCELLED,
}
TERMINAL_EXECUTION: frozenset[ExecutionStatus] = frozenset(EXECUTION_OF[s] for s in TERMINAL)


@dataclass(frozen=True)
class Lifecycle(Generic[S]):
    """A transition table: ``moves[old]`` is every status ``old`` may move to."""

    name: str
    kind: type[S]
    moves: Mapping[S, frozenset[S]]

    def allows(self, old: str, new: str) -> bool:
        return old == new or self.kind(new) in self.moves[self.kind(old)]

    def moves_to(self, old: str, new: str) -> bool:
        """``old`` may move to ``new``, a different status (False for a spelling it does not know)."""
        try:
            return old != new and self.allows(old, new)
        except ValueError:
            return False

    def check(self, old: str, new: str) -> S:
        """``new`` as the enum, or ``IllegalTransition`` when the table has no such move."""
        try:
            allowed = self.allows(old, new)
        except ValueError:  # a spelling this lifecycle does not know
            allowed = False
        if not allowed:
            raise IllegalTransition(self.name, old, new)
        return self.kind(new)


def _to(*targets: S) -> frozenset[S]:
    return frozenset(targets)


_T = TaskStatus
TASK = Lifecycle("task status", TaskStatus, {
    _T.QUEUED: _to(_T.RUNNING, *WAITING, *TERMINAL),
    _T.RUNNING: _to(*WAITING, *TERMINAL),
    _T.WAITING_APPROVAL: _to(_T.RUNNING, _T.WAITING_INPUT, *TERMINAL),
    _T.WAITING_INPUT: _to(_T.RUNNING, _T.WAITING_APPROVAL, *TERMINAL),
    _T.COMPLETED: _to(),
    _T.FAILED: _to(),
    _T.CANCELLED: _to(),
})

_E = ExecutionStatus
EXECUTION = Lifecycle("gateway execution record", ExecutionStatus, {
    _E.QUEUED: _to(_E.RUNNING, _E.CANCELLING, *TERMINAL_EXECUTION),
    _E.RUNNING: _to(_E.WAITING_USER, _E.CANCELLING, *TERMINAL_EXECUTION),
    _E.WAITING_USER: _to(_E.RUNNING, _E.CANCELLING, *TERMINAL_EXECUTION),
    # The client marks CANCELLING in the record while we mark RUNNING or WAITING_USER:
    # the cancel itself arrives as a CANCEL_TASK command, so either write may land last.
    _E.CANCELLING: _to(_E.RUNNING, _E.WAITING_USER, *TERMINAL_EXECUTION),
    _E.COMPLETED: _to(),
    _E.FAILED: _to(),
    _E.CANCELLED: _to(),
})

_S = SupervisorState
SUPERVISOR = Lifecycle("app-server supervisor", SupervisorState, {
    _S.STARTING: _to(_S.UP, _S.RESTARTING, _S.DOWN, _S.STOPPED),
    _S.UP: _to(_S.RESTARTING, _S.DOWN, _S.STOPPED),
    _S.RESTARTING: _to(_S.UP, _S.DOWN, _S.STOPPED),
    _S.DOWN: _to(_S.STARTING, _S.RESTARTING, _S.STOPPED),
    _S.STOPPED: _to(),
})

_D = DaemonPhase
DAEMON = Lifecycle("daemon phase", DaemonPhase, {
    _D.STARTING: _to(_D.WAITING_FOR_PAIRING, _D.RUNNING, _D.STOPPED),  # a failed start: stopped
    _D.WAITING_FOR_PAIRING: _to(_D.RUNNING, _D.STOPPED),  # paired, or stopped while waiting
    _D.RUNNING: _to(_D.STOPPING, _D.STOPPED),  # stopped without a drain: the task group failed
    _D.STOPPING: _to(_D.STOPPED),
    _D.STOPPED: _to(),
})

_Q = QueueStatus
_Q_TERMINAL = (_Q.COMPLETED, _Q.FAILED, _Q.CANCELLED)  # what a device's `complete` may say
QUEUE = Lifecycle("control plane queue", QueueStatus, {
    _Q.QUEUED: _to(_Q.RUNNING, _Q.CANCELLED),  # claimed, or cancelled before any device had it
    _Q.RUNNING: _to(*_Q_TERMINAL, _Q.ABANDONED),
    _Q.ABANDONED: _to(*_Q_TERMINAL, _Q.QUEUED),  # a late result beats none; or retried
    _Q.FAILED: _to(_Q.QUEUED),  # retried: a new attempt
    _Q.COMPLETED: _to(),
    _Q.CANCELLED: _to(),
})
# The queue's own end: a task no device will report on again (until it is retried).
QUEUE_FINISHED: frozenset[QueueStatus] = frozenset({*_Q_TERMINAL, _Q.ABANDONED})

LIFECYCLES: tuple[Lifecycle[TaskStatus] | Lifecycle[ExecutionStatus] | Lifecycle[SupervisorState]
                  | Lifecycle[DaemonPhase] | Lifecycle[QueueStatus], ...] = (
    TASK, EXECUTION, SUPERVISOR, DAEMON, QUEUE)
