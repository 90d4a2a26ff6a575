"""Every task the device is running, whichever source it came from: the ``RunRegistry``.

One registry per daemon (the idea of uvicorn's ``ServerState``): the Boss source and
the Redis gateway both put their runs here, so the daemon's drain is one loop over
one set and cannot treat the sources differently. For each run it holds the cancel
event (the runner's only stop signal: it interrupts the turn and returns
``cancelled``), the cancel reason, and whether the run holds one of the device's
``Slots``.

Ordering the registry takes care of:

* **Admission.** ``async with registry.admit(source, task_id, steer=...)`` is the one
  way a task takes a device slot and gives it back. ``admit`` itself (no await) marks
  the task *starting*: a cancel reaches it from then on, a second copy is refused
  (``knows``), and a task that is not a steer takes a free slot at once when there is
  one. Inside the block ``slot()`` waits in line for one (a cancel ends the wait; a
  steer joins a turn that already holds a slot and takes none) and ``register()`` makes
  it a run in flight (the drain, ``ids`` and ``count`` see it). Leaving the block, on
  every path, takes the task out of the registry and hands its slot back.
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
* **Force after grace.** Once a run's cancel is set, ``call_runner`` gives the runner
  ``cancel_grace_s`` to interrupt its turn and return (no time at all with a forced
  cancel); then it cancels the runner outright and the task ends ``cancelled`` with
  ``cancel_forced``, whichever source it came from and whoever cancelled it (the user,
  the source, or the daemon's drain).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from types import TracebackType
from dataclasses import dataclass, field
from typing import Any

from boss_agent import metrics
from boss_agent.aio import race
from boss_agent.progress.card import new_card
from boss_agent.progress.reducer import reduce
from boss_agent.redact import sanitize_text
from boss_agent.sources.contract import FleetThreads
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
# After a cancel, a runner has this long to interrupt its turn (codex answers turn/interrupt
# within a second) before it is cancelled outright; the daemon's stop budget counts it.
CANCEL_GRACE_S = 10.0
CANCEL_FORCED = "cancel_forced"

Key = tuple[str, str]  # (source name, task id): ids of different sources never collide


@dataclass(eq=False)
class Run:
    """One task in flight: its cancel signal and its hold on a device slot."""

    source: str
    task_id: str
    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    force: asyncio.Event = field(default_factory=asyncio.Event)  # stop now, no grace
    reason: str = ""
    steer: bool = False  # joins a running turn: it takes no slot and holds no thread
    holds_slot: bool = False
    forced: bool = False  # the grace ran out and the runner was cancelled outright
    task: asyncio.Task[Any] | None = None  # the asyncio task running it, for ``abort``
    owner: Any = None  # the source's own object for this run (the gateway's Execution)
    # The thread refs this run holds (its task's ref, then the id its turn started on),
    # from its admission until its runner returns; a steer holds none.
    threads: set[str] = field(default_factory=set)
    admitted: bool = False
    waiting: bool = False  # waiting for its thread's running turn (it holds no slot)
    # How far its start has come, for a source's own requests that should not compete
    # with it (``aio.until_set``): ``started`` once its runner has begun (the source saw its
    # first card), ``shown`` once its first progress went out to the person; both once
    # it waits in line for a slot, and once it ended.
    started: asyncio.Event = field(default_factory=asyncio.Event)
    shown: asyncio.Event = field(default_factory=asyncio.Event)

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

    def __init__(self, slots: Slots, thread_wait_s: float = THREAD_WAIT_S,
                 cancel_grace_s: float = CANCEL_GRACE_S) -> None:
        self.slots = slots
        self.thread_wait_s = thread_wait_s
        self.cancel_grace_s = cancel_grace_s
        self._thread_freed = asyncio.Event()  # a run gave its threads up
        self._runs: dict[Key, Run] = {}
        self._starting: dict[Key, Run] = {}  # admitted, not yet registered
        self.changed = asyncio.Event()  # a run ended or a slot was handed back
        self._idle = asyncio.Event()
        self._idle.set()
        self.threads: FleetThreads | None = None  # the gateway's fleet, while it is up
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

    def turns(self, source: str) -> int:
        """Runs of ``source`` that hold or wait for a slot: turns a steer could join (a
        steer holds none, nor does a run waiting for its thread's running turn)."""
        return sum(1 for run in self._runs.values()
                   if run.source == source and not run.steer and not run.waiting)

    def holder(self, thread_ref: str, besides: Run | None = None) -> Run | None:
        """The run (other than ``besides``) holding ``thread_ref``, if any."""
        for run in self._runs.values():
            if run is not besides and thread_ref in run.threads:
                return run
        return None

    def knows(self, source: str, task_id: str) -> bool:
        """The task is starting or running here (a second copy must not run)."""
        return (source, task_id) in self._starting or (source, task_id) in self._runs

    # ------------------------------------------------------------------ admission

    def admit(self, source: str, task_id: str, *, steer: bool = False, owner: Any = None) -> Admission:
        """The task is starting: see ``Admission``; use it in ``async with``."""
        if self.knows(source, task_id):
            raise ValueError(f"{source} task {task_id} is already here")
        run = Run(source, task_id, steer=steer, owner=owner)
        self._starting[run.key] = run
        if not steer and self.slots.try_acquire():
            run.holds_slot = True
        return Admission(self, run)

    def _register(self, run: Run) -> None:
        del self._starting[run.key]
        self._runs[run.key] = run
        self._idle.clear()

    def _leave(self, run: Run) -> None:  # idempotent: the block's end, then its task's
        run.started.set()
        run.shown.set()
        if self._starting.get(run.key) is run:
            del self._starting[run.key]
            self.hand_back(run)
        elif self._runs.get(run.key) is run:
            self.finish(run)

    def finish(self, run: Run) -> None:
        """``run`` ended (any way at all): give its slot back and forget it (the end of
        ``async with admit``, and of a run a test registered by hand)."""
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

    async def _slot_or_cancel(self, run: Run) -> bool:
        """Wait in line for a slot for ``run``; False when it is cancelled first."""
        if run.holds_slot:
            return True
        if run.cancel.is_set():
            return False
        await race(self.take_back(run), run.cancel.wait())
        # Both may finish in the same step: a slot it was handed is its own, given back at the end.
        return run.holds_slot

    # ------------------------------------------------------------------ cancel

    def cancel(self, source: str, task_id: str, reason: str = "", force: bool = False) -> bool:
        """Cancel a run, or one that is starting (it sees the cancel when it runs). False: unknown."""
        key = (source, task_id)
        run = self._runs.get(key) or self._starting.get(key)
        if run is None:
            return False
        logger.info("cancelling %s task %s", source, task_id)
        run.request_cancel(reason, force)
        return True

    def cancel_all(self, reason: str) -> None:
        """Shutdown: every runner interrupts its turn and reports ``cancelled``."""
        for run in self._runs.values():
            run.request_cancel(reason)

    def abort(self) -> None:
        """Cancel the runs' asyncio tasks outright (the runners ignored ``cancel_all``)."""
        for run in self._runs.values():
            if run.task is not None:
                run.task.cancel()

    async def wait_idle(self, source: str | None = None) -> None:
        """Until no run is left (of ``source`` only, when given)."""
        if source is None:
            await self._idle.wait()
            return
        while self.count(source):
            self.changed.clear()
            await self.changed.wait()

    async def wind_down(self, source: str, reason: str, timeout_s: float) -> None:
        """``source`` failed: cancel its runs and give them ``timeout_s`` to end."""
        for run in self._runs.values():
            if run.source == source:
                run.request_cancel(reason)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self.wait_idle(source)

    # ------------------------------------------------------------------ the fleet

    def publish_turn(self, thread_ref: str, turn_id: str) -> None:
        """A run's turn started: its thread and live turn are this device's."""
        self._publish(lambda threads: threads.turn_started(thread_ref, turn_id))

    def publish_end(self, thread_ref: str | None, turn_id: str | None) -> None:
        """A run ended: its turn is over, its thread stays here."""
        if thread_ref or turn_id:
            self._publish(lambda threads: threads.task_ended(thread_ref, turn_id))

    def _publish(self, call: Callable[[FleetThreads], Awaitable[None]]) -> None:
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
        if had_slot and not await self._slot_or_cancel(run):
            return _cancelled_waiting(thread)
        return None

    # ------------------------------------------------------------------ the runner

    async def call_runner(self, run: Run, runner: TaskRunner, task: Task, sink: TaskSink, *,
                          agent_type: str | None = None) -> TaskResult:
        """``runner.run`` once ``task`` holds its thread (one run per thread), forced after
        the grace once cancelled, with an exception from the runner turned into a
        ``failed`` result.

        Both sources run every task through here, so this is where tasks are counted
        and timed (``metrics``): a run cut off by shutdown counts as ``cancelled``.
        """
        started = time.monotonic()
        result = TaskResult(status="cancelled", error_code="agent_shutdown")
        metrics.task_started(run.source, agent_type)
        try:
            if not run.steer:  # a steer joins the running turn
                refused = await self._admit(run, task, sink)
                if refused is not None:
                    result = refused
                    return result
            result = await self._forced_after_grace(run, runner.run(task, sink, run.cancel))
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


    async def _forced_after_grace(self, run: Run, work: Awaitable[TaskResult]) -> TaskResult:
        """``work``, cancelled outright once ``run`` has been cancelled for the grace."""
        job = asyncio.ensure_future(work)
        guard = asyncio.ensure_future(self._force(run, job))
        try:
            return await job
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not run.forced or (current is not None and current.cancelling()):
                raise  # a shutdown's abort, or our own caller's cancel: not ours to swallow
            logger.warning("%s task %s: the runner ignored the cancel; cancelled outright",
                           run.source, run.task_id)
            return TaskResult("cancelled", error_code=CANCEL_FORCED,
                              error_message="the runner did not stop within the grace period")
        finally:
            guard.cancel()
            job.cancel()  # our caller was cancelled: the runner goes with it

    async def _force(self, run: Run, job: asyncio.Future[TaskResult]) -> None:
        await run.cancel.wait()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.cancel_grace_s):
                await run.force.wait()
        if not job.done():
            run.forced = True
            job.cancel()


class Admission:
    """One task's hold on the device, from the moment its source takes it until it ends.

    Made by ``RunRegistry.admit`` and used as ``async with``: whatever happens inside
    (the source decides not to run it, the runner returns, the task is cancelled or
    its source fails), leaving the block takes the task out of the registry and hands
    its slot back. A steer never takes one: it joins a turn that already holds a slot,
    and waiting for another would deadlock a busy device until the very turn it steers
    ends.
    """

    def __init__(self, registry: RunRegistry, run: Run) -> None:
        self.registry = registry
        self.run = run

    def __repr__(self) -> str:
        return f"Admission({self.run.source} {self.run.task_id}, slot={self.run.holds_slot})"

    @property
    def ready(self) -> bool:
        """It may run now: it holds a slot, or it is a steer and needs none."""
        return self.run.holds_slot or self.run.steer

    async def slot(self) -> bool:
        """Wait in line for a slot unless ``ready``; False when cancelled first."""
        return self.ready or await self.registry._slot_or_cancel(self.run)

    def register(self) -> Run:
        """It runs: the drain, ``ids`` and ``count`` see it (a cancel already did)."""
        self.registry._register(self.run)
        return self.run

    def start_in(self, tg: asyncio.TaskGroup, work: Coroutine[Any, Any, None], name: str) -> None:
        """Run ``work`` (which enters this admission) as the run's task in ``tg``.

        Leaving is also tied to the task's end: a task cancelled before its first step
        never enters ``async with`` (its source failed right after taking the task), and
        its admission would otherwise stay in the registry, holding its slot and its id.
        """
        self.run.task = tg.create_task(work, name=name)
        self.run.task.add_done_callback(lambda _: self.registry._leave(self.run))

    async def __aenter__(self) -> Admission:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.registry._leave(self.run)


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
