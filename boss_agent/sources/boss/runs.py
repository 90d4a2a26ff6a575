"""Claimed tasks, from the claim answer to the spooled result (device API §3-§5).

``TaskRuns`` validates each claimed task, runs it on the runner in the daemon's task
group with a sink that uploads progress and asks for approvals, and spools the
result. Its runs live in the daemon's ``RunRegistry`` (source name ``boss``), shared
with the Redis gateway. It never holds more than ``max_concurrent`` tasks, and it
calls the runner only with one of the registry's slots (the device's budget): a
claimed task that finds every slot taken by the other source waits in line. A malformed task is
completed ``failed`` with its ``TaskRejected`` code and nothing runs; a task without
a usable ``taskId`` cannot be completed and is only logged. A task id that is
already running or already spooled is never run a second time. A steer task
(``targetCodexTurnId`` set) joins a turn that already holds a slot: it takes none and
counts against no cap (the rule lives in ``RunRegistry.admit``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from boss_agent.errors import TaskRejected
from boss_agent.progress.card import Card
from boss_agent.redact import sanitize_text
from boss_agent.sources.slots import Slots
from boss_agent.sources.boss.api import BossApi
from boss_agent.sources.inflight import Admission, Run, RunRegistry
from boss_agent.sources.boss.remote_approvals import RemoteApprovals
from boss_agent.sources.boss.progress import ProgressUploader
from boss_agent.sources.boss.spool import CompletionSpool, RunningJournal
from boss_agent.tasks import (
    MAX_ID_CHARS,
    ApprovalRequest,
    Task,
    TaskResult,
    TaskRunner,
    parse_task,
)

logger = logging.getLogger(__name__)

SOURCE = "boss"  # this source's name in the RunRegistry
FINAL_UPLOAD_TIMEOUT_S = 10.0  # the final card is also in `complete`; never wait long for it


class JournalRecord:
    """One task's record in the running journal: written in a thread (two fsyncs), and
    on disk before Codex acts on the task.

    The write starts once the runner has begun (its first card), one loop turn later:
    by then the runner's first request is on its way to codex, and the worker thread
    no longer competes with it for the interpreter. The runner's own wait
    (``written``) starts it at the latest. ``remove`` takes the record out after its
    write, never before it (removed first, a record written late would come back as a
    restart failure), and once removed it is never written.
    """

    def __init__(self, journal: RunningJournal, task_id: str, attempt: int) -> None:
        self.journal = journal
        self.task_id = task_id
        self.attempt = attempt
        self._write: asyncio.Future[None] | None = None
        self._removed = False

    def start_soon(self) -> None:
        asyncio.get_running_loop().call_soon(self._start)

    def _start(self) -> asyncio.Future[None] | None:
        if self._write is None and not self._removed:
            self._write = asyncio.ensure_future(asyncio.to_thread(self._add))
        return self._write

    def _add(self) -> None:
        """In a thread. Never raises: a disk that refuses the write keeps the record in
        memory (``degraded``), and the task runs, as it always did."""
        try:
            self.journal.add(self.task_id, self.attempt)
        except Exception:  # a bug here must not stop the task's result from being spooled
            logger.exception("writing the running journal failed for task %s", self.task_id)

    async def written(self) -> None:
        write = self._start()
        if write is not None:
            await asyncio.shield(write)  # the write is shared; a cancel here must not end it

    def remove(self) -> None:
        self._removed = True
        write = self._write
        if write is None or write.done():
            self.journal.remove(self.task_id)
        else:
            write.add_done_callback(lambda _: self.journal.remove(self.task_id))


class BossTaskSink:
    """The ``TaskSink`` the runner gets for one Boss task."""

    def __init__(self, task: Task, uploader: ProgressUploader, approvals: RemoteApprovals,
                 cancel: asyncio.Event, record: JournalRecord | None = None,
                 registry: RunRegistry | None = None, run: Run | None = None) -> None:
        self.task = task
        self.uploader = uploader
        self.approvals = approvals
        self.cancel = cancel
        self.record = record
        self.registry = registry
        self.run = run

    async def ready_to_run(self) -> None:
        """Optional sink method: the running journal's record is on disk before Codex acts."""
        if self.record is not None:
            await self.record.written()

    async def progress(self, card: Card) -> None:
        if self.run is not None and not self.run.started.is_set():
            self.run.started.set()  # the runner's first card: its first request to codex follows
            if self.record is not None:
                self.record.start_soon()
        self.uploader.update(card)  # a reference: serialized only if it is uploaded

    async def request_approval(self, request: ApprovalRequest) -> str | dict[str, Any]:
        return await self.approvals.request(self.task, request, self.cancel)

    async def withdraw_approval(self, approval_id: str, reason: str) -> None:
        await self.approvals.withdraw(self.task, approval_id, reason)

    async def turn_started(self, thread_ref: str, turn_id: str) -> None:
        """Optional sink method: the live ids go out with the next progress upload (and
        to the fleet, when a gateway runs beside this source)."""
        self.uploader.set_refs(thread_ref, turn_id)
        if self.registry is not None:
            if self.run is not None:
                self.registry.turn_started(self.run, thread_ref)
            self.registry.publish_turn(thread_ref, turn_id)


def usable_task_id(raw: Any) -> str | None:
    task_id = raw.get("taskId") if isinstance(raw, dict) else None
    if isinstance(task_id, str) and task_id and len(task_id) <= MAX_ID_CHARS:
        return task_id
    return None


class TaskRuns:
    def __init__(self, runner: TaskRunner, api: BossApi, spool: CompletionSpool,
                 journal: RunningJournal, approvals: RemoteApprovals, max_concurrent: int,
                 on_spooled: Callable[[], None], registry: RunRegistry | None = None) -> None:
        self.runner = runner
        self.api = api
        self.spool = spool
        self.journal = journal
        self.approvals = approvals
        self.max_concurrent = max_concurrent
        self.registry = registry if registry is not None else RunRegistry(Slots(max_concurrent))
        self.slots = self.registry.slots
        self.changed = self.registry.changed  # set whenever a run ends or a slot frees up
        self.on_spooled = on_spooled

    @property
    def free_slots(self) -> int:
        """How many tasks to claim now: free device slots, within this source's own cap."""
        return max(0, min(self.slots.free, self.max_concurrent - self.turns_running))

    @property
    def turns_running(self) -> int:
        """Runs that hold (or wait for) a slot: turns a steer could join."""
        return self.registry.turns(SOURCE)

    def running_ids(self) -> list[str]:
        return self.registry.ids(SOURCE)

    def cancel(self, task_id: str) -> bool:
        return self.registry.cancel(SOURCE, task_id)

    def accept(self, raw: Any, tg: asyncio.TaskGroup) -> Run | None:
        """Take one claimed task object: reject it, ignore a duplicate, or start it (its run)."""
        task_id = usable_task_id(raw)
        if task_id is None:
            logger.warning("the server sent a task without a usable taskId; skipped")
            return None
        if self.registry.knows(SOURCE, task_id) or task_id in self.spool:
            logger.info("task %s is already running or finished here; not run again", task_id)
            self.on_spooled()
            return None
        try:
            task = parse_task(raw)
        except TaskRejected as exc:
            logger.warning("task %s rejected: %s (%s)", task_id, exc, exc.code)
            self._spool(task_id, TaskResult(status="failed", error_code=exc.code,
                                            error_message=sanitize_text(exc, limit=300)))
            return None
        steer = task.target_turn_id is not None
        if not steer and self.turns_running >= self.max_concurrent:
            # The claim asked for free slots only; more tasks than that is a server bug.
            self._spool(task_id, TaskResult(status="failed", error_code="device_busy",
                                            error_message="the device has no free task slot"))
            return None
        # The slot is taken now when free; otherwise the gateway took it during the
        # claim's long poll and the run waits in line for one. Registered at once: the
        # next claim and heartbeat count it.
        admission = self.registry.admit(SOURCE, task_id, steer=steer)
        admission.register()
        # The journal's write (two fsyncs) runs in a thread, beside the runner's
        # thread/start: the runner waits for it only before Codex acts (ready_to_run),
        # so a task this daemon may have started is always on disk first.
        record = JournalRecord(self.journal, task_id, task.attempt)
        admission.start_in(tg, self._run(task, admission, record), f"task {task_id}")
        return admission.run

    def _spool(self, task_id: str, result: TaskResult, *, deliver: bool = True,
               record: JournalRecord | None = None) -> None:
        self.spool.put_result(task_id, result)
        # After the spool: a crash in between duplicates, never loses.
        if record is None:
            self.journal.remove(task_id)
        else:
            record.remove()
        if deliver:
            self.on_spooled()

    async def _run(self, task: Task, admission: Admission, record: JournalRecord) -> None:
        async with admission:  # on every path: out of the registry, its slot handed back
            await self._run_admitted(task, admission, record)

    async def _run_admitted(self, task: Task, admission: Admission, record: JournalRecord) -> None:
        run = admission.run
        cancel = run.cancel
        uploader = ProgressUploader(self.api, task.task_id, cancel, on_first_upload=run.shown.set)
        sink = BossTaskSink(task, uploader, self.approvals, cancel, record, self.registry, run)
        result: TaskResult | None = None
        try:
            if not admission.ready:  # it waits in line for a slot: nothing of it competes now
                run.started.set()
                run.shown.set()
            may_run = await admission.slot()
            async with asyncio.TaskGroup() as tg:
                uploads = tg.create_task(uploader.run())
                try:
                    result = await self._execute(task, sink, run) if may_run else TaskResult(
                        status="cancelled", error_code="cancelled",
                        error_message="cancelled while waiting for a free task slot")
                    # Durable first; delivered after the final card, which the server
                    # refuses (409) once the task is complete.
                    self._spool(task.task_id, result, deliver=False, record=record)
                    self.registry.publish_end(result.codex_thread_ref, result.turn_id)
                finally:
                    uploader.close(result.execution_progress if result else None)
                # Not in this body: an exception here would reach the group as an
                # ExceptionGroup; the helper ends the upload itself when time is up.
                tg.create_task(self._bounded(uploads, task.task_id))
        except asyncio.CancelledError:
            if result is None:  # forced shutdown: the runner never returned
                self._spool(task.task_id, TaskResult(
                    status="cancelled", error_code="agent_shutdown",
                    error_message="the agent stopped before the task finished"), record=record)
            raise
        finally:
            self.on_spooled()

    @staticmethod
    async def _bounded(uploads: asyncio.Task[None], task_id: str) -> None:
        try:
            async with asyncio.timeout(FINAL_UPLOAD_TIMEOUT_S):
                await asyncio.shield(uploads)
        except TimeoutError:
            logger.info("final progress upload of task %s did not finish in time", task_id)
            uploads.cancel()

    async def _execute(self, task: Task, sink: BossTaskSink, run: Run) -> TaskResult:
        logger.info("task %s started (%s)", task.task_id, task.intent)
        result = await self.registry.call_runner(run, self.runner, task, sink)
        logger.info("task %s finished: %s", task.task_id, result.status)
        return result
