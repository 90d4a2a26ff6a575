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


class BossTaskSink:
    """The ``TaskSink`` the runner gets for one Boss task."""

    def __init__(self, task: Task, uploader: ProgressUploader, approvals: RemoteApprovals,
                 cancel: asyncio.Event, journaled: asyncio.Future[None] | None = None,
                 registry: RunRegistry | None = None, run: Run | None = None) -> None:
        self.task = task
        self.uploader = uploader
        self.approvals = approvals
        self.cancel = cancel
        self.journaled = journaled
        self.registry = registry
        self.run = run

    async def ready_to_run(self) -> None:
        """Optional sink method: the running journal's record is on disk before Codex acts."""
        if self.journaled is not None:
            await asyncio.shield(self.journaled)  # the write is shared; a cancel here must not end it

    async def progress(self, card: Card) -> None:
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

    def accept(self, raw: Any, tg: asyncio.TaskGroup) -> None:
        """Take one claimed task object: reject it, ignore a duplicate, or start it."""
        task_id = usable_task_id(raw)
        if task_id is None:
            logger.warning("the server sent a task without a usable taskId; skipped")
            return
        if self.registry.knows(SOURCE, task_id) or task_id in self.spool:
            logger.info("task %s is already running or finished here; not run again", task_id)
            self.on_spooled()
            return
        try:
            task = parse_task(raw)
        except TaskRejected as exc:
            logger.warning("task %s rejected: %s (%s)", task_id, exc, exc.code)
            self._spool(task_id, TaskResult(status="failed", error_code=exc.code,
                                            error_message=sanitize_text(exc, limit=300)))
            return
        steer = task.target_turn_id is not None
        if not steer and self.turns_running >= self.max_concurrent:
            # The claim asked for free slots only; more tasks than that is a server bug.
            self._spool(task_id, TaskResult(status="failed", error_code="device_busy",
                                            error_message="the device has no free task slot"))
            return
        # The slot is taken now when free; otherwise the gateway took it during the
        # claim's long poll and the run waits in line for one. Registered at once: the
        # next claim and heartbeat count it.
        admission = self.registry.admit(SOURCE, task_id, steer=steer)
        admission.register()
        # The journal's write (two fsyncs) runs in a thread, beside the runner's
        # thread/start: the runner waits for it only before Codex acts (ready_to_run),
        # so a task this daemon may have started is always on disk first.
        journaled = asyncio.ensure_future(asyncio.to_thread(self._journal, task_id, task.attempt))
        admission.start_in(tg, self._run(task, admission, journaled), f"task {task_id}")

    def _journal(self, task_id: str, attempt: int) -> None:
        """In a thread. Never raises: a disk that refuses the write keeps the record in
        memory (``degraded``), and the task runs, as it always did."""
        try:
            self.journal.add(task_id, attempt)
        except Exception:  # a bug here must not stop the task's result from being spooled
            logger.exception("writing the running journal failed for task %s", task_id)

    def _spool(self, task_id: str, result: TaskResult, *, deliver: bool = True,
               journaled: asyncio.Future[None] | None = None) -> None:
        self.spool.put_result(task_id, result)
        # After the spool: a crash in between duplicates, never loses. And after the
        # journal's own write, which may still be under way in its thread (a forced
        # shutdown): removed first, the record would come back as a restart failure.
        if journaled is None or journaled.done():
            self.journal.remove(task_id)
        else:
            journaled.add_done_callback(lambda _: self.journal.remove(task_id))
        if deliver:
            self.on_spooled()

    async def _run(self, task: Task, admission: Admission, journaled: asyncio.Future[None]) -> None:
        async with admission:  # on every path: out of the registry, its slot handed back
            await self._run_admitted(task, admission, journaled)

    async def _run_admitted(self, task: Task, admission: Admission, journaled: asyncio.Future[None]) -> None:
        run = admission.run
        cancel = run.cancel
        uploader = ProgressUploader(self.api, task.task_id, cancel)
        sink = BossTaskSink(task, uploader, self.approvals, cancel, journaled, self.registry, run)
        result: TaskResult | None = None
        try:
            may_run = await admission.slot()
            async with asyncio.TaskGroup() as tg:
                uploads = tg.create_task(uploader.run())
                try:
                    result = await self._execute(task, sink, run) if may_run else TaskResult(
                        status="cancelled", error_code="cancelled",
                        error_message="cancelled while waiting for a free task slot")
                    # Durable first; delivered after the final card, which the server
                    # refuses (409) once the task is complete.
                    self._spool(task.task_id, result, deliver=False, journaled=journaled)
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
                    error_message="the agent stopped before the task finished"), journaled=journaled)
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
