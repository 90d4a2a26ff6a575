"""One ASK_AGENT from its stream entry to its terminal record: claim, run, report, ack.

Ordering at the end of a task is deliberate: the terminal record first (a consumer
that sees ``appStreamResponse`` and reads the record finds the outcome), then the
closing events, then the caller's RESUME, then XACK. A crash before the ack leaves
the entry pending; whoever reclaims it finds the terminal record and only acks (a
crash exactly between record and events would leave that stream unterminated; the
record still says how the task ended). Once the report has started, a shutdown lets
it finish (bounded) instead of reporting the task twice.

Idempotency of a reclaimed task (the rule this module enforces): a task whose
record says it was already started (RUNNING, WAITING_USER or CANCELLING) by a worker
that is gone, or by an earlier process with our own worker id, is never run again.
It is reported FAILED with error ``agent_restarted``: a Codex turn may already have
edited files or run commands, so a second run could repeat side effects the user
never asked twice for. Only a task that never started (no record, or QUEUED) runs.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis

from boss_agent.lifecycles import EXECUTION_OF, TERMINAL_EXECUTION, ExecutionStatus
from boss_agent.redact import sanitize_text
from boss_agent.sources.slots import Slots
from boss_agent.sources.gateway import wire
from boss_agent.sources.gateway.registry import (
    ExecutionRecords,
    Stored,
    with_status,
    worker_online,
)
from boss_agent.sources.gateway.retry import RedisRetry
from boss_agent.sources.gateway.sink import GatewaySink, Publisher
from boss_agent.sources.contract import FleetThreads
from boss_agent.sources.inflight import Run, RunRegistry
from boss_agent.tasks import Task, TaskResult, TaskRunner

logger = logging.getLogger(__name__)

SHUTDOWN_REPORT_S = 5.0  # on shutdown, how long reporting a cancelled task may take
_CLAIMED = frozenset({ExecutionStatus.RUNNING, ExecutionStatus.WAITING_USER,
                      ExecutionStatus.CANCELLING})  # a live start, not a queue entry
SOURCE = "gateway"  # this source's name in the RunRegistry


@dataclass(frozen=True)
class Entry:
    stream: str
    entry_id: str


@dataclass
class Shared:
    """What every execution of one gateway needs."""

    redis: aioredis.Redis
    records: ExecutionRecords
    policy: RedisRetry
    worker_id: str
    group: str
    runner: TaskRunner
    runs: RunRegistry
    default_agent_type: str
    stats: Counter[str] = field(default_factory=Counter)
    # Where threads and turns are published (the gateway's ``Fleet``; None in bare tests).
    # Named by its contract: the fleet is built on this, so it cannot be imported here.
    fleet: FleetThreads | None = None

    @property
    def slots(self) -> Slots:
        return self.runs.slots

    async def ack(self, entry: Entry) -> None:
        await self.policy.call("ack", self.redis.xack, entry.stream, self.group, entry.entry_id)

    def context(self, header: wire.Header) -> wire.EventContext:
        return wire.EventContext(
            session_id=header.session_id, trace_id=header.trace_id,
            agent_type=header.target_agent_type or self.default_agent_type,
            message_id=header.message_id, parent_message_id=header.parent_message_id)


class Reporter:
    """Ends one task on the wire: closing events, terminal record, caller reply, ack."""

    def __init__(self, shared: Shared, header: wire.Header, entry: Entry | None,
                 execution_id: str | None = None, known: Stored | None = None) -> None:
        self.shared = shared
        self.header = header
        self.entry = entry
        self.execution_id = execution_id  # pinned after the first write
        # The record as this worker last read or wrote it: the next write is then one
        # compare-and-set, with no read before it (registry.ExecutionRecords.update).
        self.stored = known
        self.publisher = Publisher(shared.redis, shared.context(header), shared.policy,
                                   sub_agent=bool(header.source_agent_type))
        self.acked = entry is None

    async def ack(self) -> None:
        if not self.acked and self.entry is not None:
            await self.shared.ack(self.entry)
            self.acked = True

    async def set_status(self, status: str, **fields: Any) -> bool:
        """Move the record to ``status``; False (nothing written) if it already ended.

        A terminal record is never overwritten: whoever ended the task first wins, so
        a task is reported once even when two workers race over a reclaimed entry.
        """
        header, worker_id = self.header, self.shared.worker_id
        written = False
        attempted: dict[str, Any] | None = None

        def mutate(record: dict[str, Any] | None) -> dict[str, Any] | None:
            nonlocal written, attempted
            if record is not None and record == attempted:
                written = True  # our write landed but its reply was lost: the retry finds it
                return None
            written = False  # only the attempt that lands counts
            if record and record.get("status") in TERMINAL_EXECUTION:
                return None
            if status == ExecutionStatus.RUNNING and record and _claimed_by_other(record, worker_id):
                return None  # two copies of one ASK raced past the start check: one runs
            record = record or {
                "execution_id": "", "message_id": header.message_id,
                "session_id": header.session_id, "trace_id": header.trace_id,
                "parent_message_id": header.parent_message_id,
                "source_agent_type": header.source_agent_type or "client",
                "target_agent_type": header.target_agent_type,
                "cancel_requested": False, "cancel_reason": ""}
            written = True
            attempted = with_status(record, status, worker_id=worker_id, **fields)
            return attempted

        async def write() -> Stored:
            # A call that failed leaves the record unknown: its retry reads it afresh, and
            # finds our own last attempt there when only the reply was lost.
            known, self.stored = self.stored, None
            return await self.shared.records.update(header.session_id, header.message_id, mutate,
                                                    self.execution_id, known)

        self.stored = await self.shared.policy.call("record", write)
        if written:
            self.execution_id = self.stored.execution_id
        return written

    async def finish(self, status: str, *, text: str = "", code: str = "", message: str = "",
                     reason: str = "", metadata: dict[str, Any] | None = None) -> None:
        """``metadata`` (codexThreadRef, turnId) rides on finalAnswer and appStreamResponse."""
        ctx = self.publisher.ctx
        events = []
        if text:
            events.append(wire.event(ctx, wire.FINAL_ANSWER, text, wire.CT_TEXT, metadata=metadata))
        if status != ExecutionStatus.COMPLETED:
            detail = sanitize_text(_detail(status, code, message, reason))
            events.append(wire.state_event(ctx, status.lower(), state_msg=detail,
                                           metadata={"errorCode": code} if code else None))
        events.append(wire.event(ctx, wire.APP_STREAM_RESPONSE, "", wire.CT_TEXT, metadata=metadata))
        error = {"code": code, "message": sanitize_text(message or code)} if code else None
        if not await self.set_status(status, error=error,
                                     **({"cancel_reason": reason} if reason else {})):
            logger.warning("task had already ended elsewhere; not reported again")
            await self.ack()
            return
        await self.publisher.write(*events)
        await self._reply_to_caller(status, text, code, message, reason)
        await self.ack()
        self.shared.stats[status.lower()] += 1

    async def _reply_to_caller(self, status: str, text: str, code: str, message: str,
                               reason: str) -> None:
        if not self.header.source_agent_type:
            return
        reply: Any = None
        if status == ExecutionStatus.FAILED:
            reply = {"error": sanitize_text(message or code)}
        elif status == ExecutionStatus.CANCELLED:
            reply = {"reason": sanitize_text(reason or "cancelled")}
        stream, fields = wire.reply_to_caller(self.header, self.publisher.ctx.agent_type,
                                              status, text, reply)
        await self.shared.policy.call("caller reply", self.shared.redis.xadd, stream, fields)


def _claimed_by_other(record: dict[str, Any], worker_id: str) -> bool:
    owner = record.get("worker_id")
    return bool(owner) and owner != worker_id and record.get("status") in _CLAIMED


def thread_metadata(result: TaskResult) -> dict[str, str]:
    """What a client needs to continue the thread or steer the turn, once known."""
    known = {"codexThreadRef": result.codex_thread_ref, "turnId": result.turn_id}
    return {k: v for k, v in known.items() if v}


def _detail(status: str, code: str, message: str, reason: str) -> str:
    """The one-line why of a task that did not complete (the event's ``state_msg``)."""
    if status == ExecutionStatus.CANCELLED:
        return reason or message or "cancelled"
    if code and message:
        return f"{code}: {message}"
    return code or message or status.lower()


class Execution:
    """A task this worker runs: owns the runner call and the sink.

    Its ``handle`` is its entry in the daemon's ``RunRegistry`` (the gateway admitted it
    there): the cancel event and reason, and its hold on a device slot.
    """

    def __init__(self, shared: Shared, ask: wire.Ask, task: Task, entry: Entry, handle: Run,
                 known: Stored | None = None) -> None:
        self.shared = shared
        self.ask = ask
        self.task = task
        self.reporter = Reporter(shared, ask.header, entry, known=known)  # known: the start check's read
        self.handle = handle
        handle.owner = self
        self.cancel = handle.cancel
        self.sink = GatewaySink(self.reporter.publisher, self.cancel, self._suspend, self._resume,
                                workdir=task.workdir)
        self.sink.on_turn = self._turn_started

    @property
    def message_id(self) -> str:
        return self.ask.header.message_id

    @property
    def cancel_reason(self) -> str:
        return self.handle.reason

    def request_cancel(self, reason: str, force: bool) -> None:
        self.handle.request_cancel(reason, force)

    async def run(self) -> None:
        report: asyncio.Future[None] | None = None
        try:
            entry = self.reporter.entry
            assert entry is not None  # run() starts from the ASK's own stream entry
            if not await self.reporter.set_status(
                    ExecutionStatus.RUNNING, stream_name=entry.stream, redis_message_id=entry.entry_id,
                    caller_agent_type=self.ask.header.source_agent_type):
                await self.reporter.ack()  # it ended, or a peer claimed it, since our check
                return
            result = await self._run_runner_with_pump()
            report = asyncio.ensure_future(self._report(result))
            await asyncio.shield(report)
        except asyncio.CancelledError:
            await self._report_on_shutdown(report)
            raise

    async def _report_on_shutdown(self, report: asyncio.Future[None] | None) -> None:
        """Shutdown: finish the report under way, or say the turn was interrupted."""
        try:
            async with asyncio.timeout(SHUTDOWN_REPORT_S):
                if report is not None:
                    await report
                else:
                    await self.reporter.finish("CANCELLED", reason="worker_shutdown")
        except Exception as exc:  # noqa: BLE001 - best effort while stopping; bounded above
            logger.warning("could not report a task stopped by shutdown (%s)", type(exc).__name__)

    async def _run_runner_with_pump(self) -> TaskResult:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.sink.pump())
            try:  # a runner that ignores a cancel is forced by the registry after the grace
                result = await self.shared.runs.call_runner(
                    self.handle, self.shared.runner, self.task, self.sink,
                    agent_type=self.reporter.publisher.ctx.agent_type)
            finally:
                self.sink.close()
        return result

    async def _turn_started(self, thread_ref: str, turn_id: str) -> None:
        """The turn's thread is this run's (one run per thread), then the fleet's to route."""
        self.shared.runs.turn_started(self.handle, thread_ref)
        if self.shared.fleet is not None:
            await self.shared.fleet.turn_started(thread_ref, turn_id)

    async def _report(self, result: TaskResult) -> None:
        await self.sink.flush()
        status = EXECUTION_OF.get(result.status, ExecutionStatus.FAILED)
        text = sanitize_text(result.result_text, workdir=self.task.workdir, limit=None) \
            if result.result_text else ""
        await self._release_turn(result)
        await self.reporter.finish(status, text=text, code=result.error_code or "",
                                   message=result.error_message or "",
                                   reason=self.cancel_reason if status == ExecutionStatus.CANCELLED else "",
                                   metadata=thread_metadata(result))

    async def _release_turn(self, result: TaskResult) -> None:
        if self.shared.fleet is None:
            return
        try:
            await self.shared.fleet.task_ended(result.codex_thread_ref, result.turn_id)
        except Exception as exc:  # noqa: BLE001 - the registry is advisory; the result must go out
            logger.warning("could not update the thread registry (%s)", type(exc).__name__)

    async def _suspend(self) -> None:
        await self.reporter.set_status(ExecutionStatus.WAITING_USER)
        await self.reporter.ack()  # suspended: the entry is done, the RESUME carries on
        self.shared.runs.hand_back(self.handle)

    async def _resume(self, cancelled: bool) -> None:
        if cancelled:
            return  # the runner is about to stop; it needs no slot for that
        await self.shared.runs.take_back(self.handle)
        await self.reporter.set_status(ExecutionStatus.RUNNING)


async def classify_start(shared: Shared, header: wire.Header) -> tuple[str, Stored]:
    """What to do with an ASK before running it: ``run``, ``skip``, ``orphaned``, ``cancelled``.

    (A second copy of a task this process already runs never gets here: the registry
    refuses to admit it.) A record carries ``worker_id`` only once a worker started the task (the client's
    QUEUED record has none), so "started" means "has an owner". The record read is
    returned too: the RUNNING claim writes against it, with no second read.
    """
    stored = await shared.policy.call("record read", shared.records.read, header.session_id,
                                      header.message_id)
    return await _verdict(shared, stored.record or {}), stored


async def _verdict(shared: Shared, record: dict[str, Any]) -> str:
    owner = str(record.get("worker_id") or "")
    if record.get("status") in TERMINAL_EXECUTION:
        return "skip"
    if not owner:
        return "cancelled" if record.get("cancel_requested") else "run"
    if owner != shared.worker_id and await worker_online(shared.redis, owner):
        return "skip"  # a duplicate delivery of a task a live worker runs
    return "cancelled" if record.get("cancel_requested") else "orphaned"
