"""Every task the device is running, whichever source it came from: the ``RunRegistry``.

One registry per daemon (the idea of uvicorn's ``ServerState``): the Boss source and
the Redis gateway both put their runs here, so the daemon's drain is one loop over
one set and cannot treat the sources differently. For each run it holds the cancel
event (the runner's only stop signal: it interrupts the turn and returns
``cancelled``), the cancel reason, and whether the run holds one of the device's
``Slots``.

Ordering the registry takes care of:

* **Starting.** A source may need a while between reading a task and having a run
  for it (the gateway checks its execution record first). ``begin`` marks the id as
  starting; a cancel that arrives meanwhile is kept and applied by ``register``, so it
  is never lost to the gap; ``abandon`` forgets both when no run comes of it.
* **Slots.** A run suspended on a user's approval hands its slot back (``hand_back``)
  and waits in line for one when it resumes (``take_back``); otherwise a device whose
  slots all wait for users could never read the answers that would free them.
* **Idle.** ``wait_idle`` returns once no run is left; ``changed`` fires whenever a
  run ends or a slot is handed back, for sources that wait for room to claim more.
* **A failing source.** Its runs outlive its loops for a moment: ``wind_down`` cancels
  them (each runner interrupts its turn on the app-server, which may not be ours and
  would otherwise go on) and waits a bounded time before the source's task group
  cancels what is left.
* **Threads for the fleet.** While a gateway is up it sets ``threads``; another
  source's runs tell it their threads and live turns through ``publish_turn`` and
  ``publish_end``, so Redis can follow up a thread the Boss source started. Publishing
  never delays a run: it happens in the background, in order, bounded, and a failure
  is only logged.
* **One run per thread** (device API §3). ``call_runner`` admits a task to its
  thread first: while another run of this device holds that thread (it was admitted
  for it, or its turn started there, and its runner has not returned), a task that
  is not a steer waits, without a slot (handed back, taken back in line after), with
  a queued card that says why, and cancellable. It fails ``thread_busy`` when still
  waiting after ``thread_wait_s`` (the approval timeout: the longest a running turn
  is normally held up by a person). Codex would otherwise fold the second task's
  ``turn/start`` into the running turn: its commands would run under the first
  task's turn, policy and person. A steer joins the running turn and is not held.
* **The runner-raised guard.** ``call_runner`` turns an exception from the runner
  (which promises not to raise) into a ``failed`` ``internal_error`` result, so one
  task fails and neither its source nor the daemon does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from boss_agent import metrics
from boss_agent.aio import race
from boss_agent.progress.card import new_card
from boss_agent.progress.reducer import reduce
from boss_agent.redact import sanitize_text
from boss_agent.sources.contract import ThreadRegistry
from boss_agent.sources.slots import Slots
from boss_agent.tasks import Task, TaskResult, TaskRunner, TaskSink
from boss_agent.timefmt import utc_iso

logger = logging.getLogger(__name__)

CANCELLED = "cancelled"  # the reason of a cancel that gave none
SOURCE_FAILED = "source_restart"  # the reason of a cancel because the task's source failed
WIND_DOWN_S = 10.0  # a failing source's runners get this long to interrupt their turns
PUBLISH_TIMEOUT_S = 10.0  # one thread publication to the fleet (Redis down: given up)
# A task waits this long for its thread's running turn unless told otherwise; the daemon
# sets the approval timeout (codex.approval_timeout_s), the config's own default.
THREAD_WAIT_S = 600.0
THREAD_BUSY = "thread_busy"

Key = tuple[str, str]  # (source name, task id): ids of different sources never collide


@dataclass(eq=False)
class Run:
    """One task in flight: its cancel signal and its hold on a device slot."""

    source: str
    task_id: str
    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    force: asyncio.Event = field(default_factory=asyncio.Event)  # stop now, no grace
    reason: str = ""
    holds_slot: bool = False
    suspended: bool = False
    task: asyncio.Task[Any] | None = None  # the asyncio task running it, for ``abort``
    owner: Any = None  # the source's own object for this run (the gateway's Execution)
    # The thread refs this run holds (its task's ref, then the id its turn started on),
    # from its admission until its runner returns; a steer holds none.
    threads: set[str] = field(default_factory=set)
    admitted: bool = False
    waiting: bool = False  # waiting for its thread's running turn (it holds no slot)

    @property
    def key(self) -> Key:
        return (self.source, self.task_id)

    def request_cancel(self, reason: str = "", force: bool = False) -> None:
        """Ask the runner to stop; the first reason given is the one reported."""
        self.reason = self.reason or reason or CANCELLED
        self.cancel.set()
        if force:
            self.force.set()


class RunRegistry:
    """The device's runs in flight, its slot budget, and the early cancels."""

    def __init__(self, slots: Slots, thread_wait_s: float = THREAD_WAIT_S) -> None:
        self.slots = slots
        self.thread_wait_s = thread_wait_s
        self._thread_freed = asyncio.Event()  # a run gave its threads up
        self._runs: dict[Key, Run] = {}
        self._starting: set[Key] = set()
        self._early: dict[Key, tuple[str, bool]] = {}
        self.changed = asyncio.Event()  # a run ended or a slot was handed back
        self._idle = asyncio.Event()
        self._idle.set()
        self.threads: ThreadRegistry | None = None  # the gateway's fleet, while it is up
        self._published: asyncio.Future[None] | None = None  # the last publication queued

    def __repr__(self) -> str:
        return f"RunRegistry(runs={len(self._runs)}, starting={len(self._starting)}, {self.slots!r})"

    # ------------------------------------------------------------------ queries

    def __len__(self) -> int:
        return len(self._runs)

    def __iter__(self) -> Iterator[Run]:
        return iter(list(self._runs.values()))

    def get(self, source: str, task_id: str) -> Run | None:
        return self._runs.get((source, task_id))

    def ids(self, source: str) -> list[str]:
        return [run.task_id for run in self._runs.values() if run.source == source]

    def count(self, source: str) -> int:
        return sum(1 for run in self._runs.values() if run.source == source)

    def waiting(self, source: str) -> int:
        """Runs of ``source`` waiting for their thread's running turn (they hold no slot)."""
        return sum(1 for run in self._runs.values() if run.source == source and run.waiting)

    def holder(self, thread_ref: str, besides: Run | None = None) -> Run | None:
        """The run (other than ``besides``) holding ``thread_ref``, if any."""
        for run in self._runs.values():
            if run is not besides and thread_ref in run.threads:
                return run
        return None

    def is_starting(self, source: str, task_id: str) -> bool:
        return (source, task_id) in self._starting

    # ------------------------------------------------------------------ lifecycle

    def begin(self, source: str, task_id: str) -> None:
        """The source read this task and is deciding whether to run it."""
        self._starting.add((source, task_id))

    def abandon(self, source: str, task_id: str) -> None:
        """No run comes of a ``begin``: forget it and any cancel that waited for it."""
        self._starting.discard((source, task_id))
        self._early.pop((source, task_id), None)

    def register(self, run: Run) -> Run:
        """Track ``run``; a cancel that arrived while it was starting applies now."""
        if run.key in self._runs:
            raise ValueError(f"{run.source} task {run.task_id} is already running")
        self._runs[run.key] = run
        self._idle.clear()
        self._starting.discard(run.key)
        if early := self._early.pop(run.key, None):
            run.request_cancel(*early)
        return run

    def finish(self, run: Run) -> None:
        """``run`` ended (any way at all): give its slot back and forget it."""
        self.hand_back(run)
        self._release_threads(run)
        if self._runs.get(run.key) is run:
            del self._runs[run.key]
        self.changed.set()
        if not self._runs:
            self._idle.set()

    # ------------------------------------------------------------------ slots

    def hand_back(self, run: Run) -> None:
        """Give ``run``'s slot back (it ended, or it waits for the user)."""
        if run.holds_slot:
            run.holds_slot = False
            self.slots.release()
            self.changed.set()

    async def take_back(self, run: Run) -> None:
        """Wait in line for a slot for ``run`` again (it resumes after the user answered)."""
        if not run.holds_slot:
            await self.slots.acquire()
            run.holds_slot = True

    # ------------------------------------------------------------------ cancel

    def cancel(self, source: str, task_id: str, reason: str = "", force: bool = False) -> bool:
        """Cancel a run, or remember the cancel for one that is starting. False: unknown."""
        key = (source, task_id)
        if run := self._runs.get(key):
            logger.info("cancelling %s task %s", source, task_id)
            run.request_cancel(reason, force)
            return True
        if key in self._starting:
            self._early[key] = (reason, force)
            return True
        return False

    def cancel_all(self, reason: str) -> None:
        """Shutdown: every runner interrupts its turn and reports ``cancelled``."""
        for run in self._runs.values():
            run.request_cancel(reason)

    def abort(self) -> None:
        """Cancel the runs' asyncio tasks outright (the runners ignored ``cancel_all``)."""
        for run in self._runs.values():
            if run.task is not None:
                run.task.cancel()

    async def wait_idle(self) -> None:
        await self._idle.wait()

    async def wind_down(self, source: str, reason: str, timeout_s: float) -> None:
        """``source`` failed: cancel its runs and give them ``timeout_s`` to end."""
        for run in self._runs.values():
            if run.source == source:
                run.request_cancel(reason)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                while self.count(source):
                    self.changed.clear()
                    await self.changed.wait()

    # ------------------------------------------------------------------ the fleet

    def publish_turn(self, thread_ref: str, turn_id: str) -> None:
        """A run's turn started: its thread and live turn are this device's."""
        self._publish(lambda threads: threads.turn_started(thread_ref, turn_id))

    def publish_end(self, thread_ref: str | None, turn_id: str | None) -> None:
        """A run ended: its turn is over, its thread stays here."""
        if thread_ref or turn_id:
            self._publish(lambda threads: threads.task_ended(thread_ref, turn_id))

    def _publish(self, call: Callable[[ThreadRegistry], Awaitable[None]]) -> None:
        threads = self.threads
        if threads is None:
            return
        previous = self._published

        async def publish() -> None:
            if previous is not None:  # in order: an end never overtakes its start
                await asyncio.wait([previous])
            try:
                async with asyncio.timeout(PUBLISH_TIMEOUT_S):
                    await call(threads)
            except Exception as exc:  # noqa: BLE001 - routing is advisory; the run goes on
                logger.warning("could not publish a thread to the fleet (%s)", type(exc).__name__)

        self._published = asyncio.ensure_future(publish())

    # ------------------------------------------------------------------ threads

    def turn_started(self, run: Run, thread_ref: str) -> None:
        """``run``'s turn started on ``thread_ref`` (a new thread's id is known only now)."""
        if run.admitted:
            run.threads.add(thread_ref)

    def _release_threads(self, run: Run) -> None:
        run.admitted = False
        if run.threads:
            run.threads.clear()
            self._thread_freed.set()

    async def _admit(self, run: Run, task: Task, sink: TaskSink) -> TaskResult | None:
        """Hold ``task``'s thread for ``run``, waiting while another run holds it.

        None: admitted (with its slot back, when it had one). Otherwise the result the
        task ends with: ``thread_busy`` after ``thread_wait_s``, or cancelled.
        """
        thread = thread_of(task)
        run.admitted = True
        if thread is None or self.holder(thread, run) is None:
            if thread is not None:
                run.threads.add(thread)
            return None
        had_slot = run.holds_slot
        self.hand_back(run)
        run.waiting = True
        logger.info("task %s waits for the running turn of its thread", task.task_id)
        await _queued_card(sink)
        try:
            async with asyncio.timeout(self.thread_wait_s):
                while self.holder(thread, run) is not None and not run.cancel.is_set():
                    self._thread_freed.clear()
                    await race(self._thread_freed.wait(), run.cancel.wait())
        except TimeoutError:
            logger.info("task %s: its thread was still busy after %.0f s", task.task_id,
                        self.thread_wait_s)
            return _thread_busy(thread)
        finally:
            run.waiting = False
        if run.cancel.is_set():
            return _cancelled_waiting(thread)
        run.threads.add(thread)  # before any await: a task behind this one keeps waiting
        if had_slot:
            slot, _ = await race(self.take_back(run), run.cancel.wait())
            if slot.cancelled() or not run.holds_slot:
                return _cancelled_waiting(thread)
        return None

    # ------------------------------------------------------------------ the runner

    async def call_runner(self, run: Run, runner: TaskRunner, task: Task, sink: TaskSink, *,
                          agent_type: str | None = None) -> TaskResult:
        """``runner.run`` once ``task`` holds its thread (one run per thread), with an
        exception from the runner turned into a ``failed`` result.

        Both sources run every task through here, so this is where tasks are counted
        and timed (``metrics``): a run cut off by shutdown counts as ``cancelled``.
        """
        started = time.monotonic()
        result = TaskResult(status="cancelled", error_code="agent_shutdown")
        metrics.task_started(run.source, agent_type)
        try:
            if not task.target_turn_id:  # a steer joins the running turn
                refused = await self._admit(run, task, sink)
                if refused is not None:
                    result = refused
                    return result
            result = await runner.run(task, sink, run.cancel)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the runner promises not to raise; one task fails, not the daemon
            logger.exception("the runner raised on task %s", task.task_id)
            result = TaskResult(status="failed", error_code="internal_error",
                                error_message=sanitize_text(exc.__class__.__name__, limit=200))
        finally:
            self._release_threads(run)
            metrics.task_finished(run.source, result.status, result.backend, result.error_code,
                                  time.monotonic() - started, agent_type)
        return result


def thread_of(task: Task) -> str | None:
    """The existing thread a task runs a turn on (None: a new thread, or a steer)."""
    if task.target_turn_id:
        return None
    if task.intent == "thread_collaboration":
        return task.target_thread_ref
    return task.codex_thread_ref


async def _queued_card(sink: TaskSink) -> None:
    """The waiting task's card: queued, and why (the runner's own card replaces it)."""
    card = reduce(new_card(now=utc_iso(ms=True)), {"method": "boss/warning", "params": {
        "kind": THREAD_BUSY,
        "message": "waiting for the running turn of this thread to end (one run per thread)"}})
    try:
        await sink.progress(card)
    except Exception as exc:  # noqa: BLE001 - a card is a nicety; the wait goes on
        logger.warning("could not send the waiting card (%s)", type(exc).__name__)


def _thread_busy(thread: str) -> TaskResult:
    return TaskResult("failed", codex_thread_ref=thread, error_code=THREAD_BUSY,
                      error_message="another task's turn was still running on this thread")


def _cancelled_waiting(thread: str) -> TaskResult:
    return TaskResult("cancelled", codex_thread_ref=thread, error_code="cancelled",
                      error_message="cancelled while waiting for the thread's running turn")
