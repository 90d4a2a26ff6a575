"""The gateway worker: reads commands from Redis Streams and runs them as tasks.

One ``Gateway`` owns two task groups: one for its loops — lease heartbeat, agent-type
reader, worker-stream (control) reader, reclaimer, and the one-off recovery of its
own pending entries — and, around it, one for its task runs (one child task each), so
a loop that fails lets the runs interrupt their turns (``wind_down``) before anything
cancels them. ``run`` returns only by cancellation or a fatal error (the lease was
lost, a non-retryable Redis error); Redis outages are retried with the policy object
and never end it.

Concurrency: ``max_concurrent`` slots bound the tasks that are *running*; the daemon
passes the ``RunRegistry`` (and its ``Slots``) it shares with the Boss source, so both
together stay within ``max_concurrent_tasks`` and its drain reaches every run here.
The agent-type reader reads only while a slot is free (and at most that many
entries), so a busy worker leaves work in the stream for its peers.
A task suspended on an approval gives its slot back (and has
acked its entry): otherwise a worker whose slots all wait for users could never
read the RESUMEs that would free them.

Reclaiming (``reclaim.py``, XPENDING + XCLAIM): an entry stays pending while its task
runs, so only entries of consumers whose lease is gone are claimed; what happens to a
reclaimed task is decided in ``execution.py``.

Known limits: a RESUME that arrives on the agent-type stream while every slot is
held by a *running* task waits for a slot (the worker-stream reader has none); a
network partition longer than the lease TTL lets a peer reclaim and fail tasks this
worker is still running (their later reports are then dropped: a terminal record
is never overwritten); an ASK read while a slot was free can find it taken (by the
Boss source, or a forwarded task) a moment later: it goes back on its stream when a
live peer serves the agent type, else it waits on this device (pending, not running).
A ``Gateway`` runs once: ``run`` closes its Redis client.

Fleet routing (which worker holds a thread, a live turn, a project) lives in
``fleet.py``; this module only calls it: ``admit`` before a task starts, ``refresh``
with each lease refresh, ``requeue`` when a read ASK finds no slot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from collections.abc import Iterable
from typing import Any, cast

from redis.typing import KeyT, StreamIdT

from boss_agent import metrics
from boss_agent.config import Config
from boss_agent.errors import (
    BadCommand,
    ConfigError,
    DuplicateWorker,
    GatewayError,
    GroupExists,
    MissingGroup,
    TaskRejected,
)
from boss_agent.sources.slots import Slots
from boss_agent.sources.gateway import keys, wire
from boss_agent.sources.gateway.connect import redis_client
from boss_agent.sources.gateway.execution import (
    SOURCE,
    Entry,
    Execution,
    Reporter,
    Shared,
    classify_start,
)
from boss_agent.sources.gateway.fleet import Fleet, held_threads_file
from boss_agent.sources.gateway.reclaim import Reclaimer
from boss_agent.sources.gateway.registry import ExecutionRecords, WorkerPresence
from boss_agent.sources.gateway.resume import route_cancel, route_resume
from boss_agent.sources.gateway.retry import RedisRetry
from boss_agent.sources.gateway.timing import GatewayTiming
from boss_agent.sources.inflight import SOURCE_FAILED, WIND_DOWN_S, Admission, Run, RunRegistry
from boss_agent.tasks import TaskRunner

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 5.0  # a Redis that does not accept a connection in 5 s is down
SOCKET_SLACK_S = 5.0  # a blocking read may take block_ms; more than that plus slack is a hang
# Every other command (lease refresh, records, events) answers in milliseconds; a hung
# one times out in this and is retried well before the lease it may be refreshing expires.
COMMAND_TIMEOUT_S = 5.0
CONTROL_BATCH = 16  # control commands are small and quick; read several at once
RECOVER_BATCH = 100  # pending entries of this worker read per page at start
LEASE_SLACK_S = 1.0  # past the TTL, Redis has expired a lease nobody refreshed
RELEASE_TIMEOUT_S = 3.0  # giving the lease back on exit must not hang a stopping daemon


class Gateway:
    """A by-framework gateway worker for boss-agent tasks (a ``TaskSource``)."""

    name = SOURCE

    def __init__(self, config: Config, runner: TaskRunner, *, worker_id: str,
                 redis_url: str | None = None, max_concurrent: int,
                 timing: GatewayTiming | None = None, retry: RedisRetry | None = None,
                 runs: RunRegistry | None = None, state_dir: Path | None = None) -> None:
        if not keys.valid_id(worker_id):
            raise ConfigError("gateway.worker_id: only letters, digits, '_', '.', '-' (≤128)")
        agent_types = tuple(config.gateway.agent_types)
        if not agent_types or not all(keys.valid_id(t) for t in agent_types):
            raise ConfigError("gateway.agent_types: ids of letters, digits, '_', '.', '-'")
        if max_concurrent < 1:
            raise ConfigError("max_concurrent must be at least 1")
        self.worker_id = worker_id
        self.agent_types = agent_types
        self.max_concurrent = max_concurrent
        self.timing = timing or GatewayTiming()
        self.group = config.gateway.consumer_group
        self.redis = redis_client(config.gateway, redis_url, socket_connect_timeout=CONNECT_TIMEOUT_S,
                                  socket_timeout=COMMAND_TIMEOUT_S)
        # The blocking reads have connections of their own, with a timeout past their block:
        # a long block costs an idle worker few reads, and never a lease refresh's bound.
        self._reads = redis_client(config.gateway, redis_url, socket_connect_timeout=CONNECT_TIMEOUT_S,
                                   socket_timeout=self.timing.read_block_ms / 1000 + SOCKET_SLACK_S)
        self.runs = runs if runs is not None else RunRegistry(
            Slots(max_concurrent), thread_wait_s=config.codex.approval_timeout_s)
        self.shared = Shared(self.redis, ExecutionRecords(self.redis), retry or RedisRetry(),
                             worker_id, self.group, runner, self.runs, agent_types[0])
        self.reclaimer = Reclaimer(self.shared, self.timing.reclaim_idle_ms, self._dispatch)
        self._agent_streams = [keys.agent_type_stream(t) for t in agent_types]
        # With a state dir the threads this worker ran outlive a restart (fleet.py).
        store = held_threads_file(state_dir, worker_id) if state_dir is not None else None
        self.fleet = self.shared.fleet = Fleet(self.shared, self.timing.lease_ttl_s,
                                               config.projects, self._agent_streams, store)
        self._control_stream = keys.worker_stream(worker_id)
        self._tg: asyncio.TaskGroup | None = None
        self._task_reader: asyncio.Task[None] | None = None
        self._accepting = True
        self._ready = False
        self._connected = False
        self._fatal: BaseException | None = None
        self._presence: WorkerPresence | None = None

    # --- public -----------------------------------------------------------------------
    @property
    def info(self) -> dict[str, Any]:
        """What the worker is doing: ids, readiness, counts, the fleet's view."""
        executions = [run.owner for run in self.runs if run.source == SOURCE]
        suspended = sum(1 for e in executions if e.sink.suspended)
        return {
            "worker_id": self.worker_id, "agent_types": list(self.agent_types),
            "ready": self._ready, "connected": self._connected,
            "max_concurrent": self.max_concurrent,
            "running": len(executions) - suspended, "suspended": suspended,
            "accepting": self._accepting, "counts": dict(self.shared.stats),
            **self.fleet.status(),
        }

    def status(self) -> dict[str, Any]:
        """The gateway's part of the state file (flat: the file holds no nested objects)."""
        info = self.info
        counts = info["counts"]
        return {
            "gateway_worker_id": info["worker_id"], "gateway_connected": info["connected"],
            "gateway_group": info.get("group"), "gateway_lease_ttl_s": info.get("lease_ttl_s"),
            "gateway_pending": info.get("pending"), "gateway_poison": counts.get("poison", 0),
            "gateway_forwarded": counts.get("forwarded", 0), "gateway_threads": info.get("threads"),
            "gateway_resume_dropped": counts.get("resume_dropped", 0),
            "gateway_projects": info.get("projects") or [],
        }

    def apply_projects(self, projects: Iterable[str]) -> None:
        """SIGHUP changed ``[projects]``: route by them now; the lease carries them to
        peers at its next refresh (within ``timing.heartbeat_s``)."""
        self.fleet.set_projects(projects)
        if self._presence is not None:
            self._presence.record = self.fleet.record()

    def stop_accepting(self) -> None:
        """Take no new ASK_AGENT from the agent-type streams; RESUME/CANCEL still work.

        The first half of a graceful stop: then ``await wait_idle()`` within the grace
        period, then cancel ``run`` (tasks still running are reported CANCELLED). An
        entry the reader had just received stays pending for this worker id and is
        recovered at the next start (or by a peer once this lease has expired).
        """
        self._accepting = False
        if self._task_reader is not None:
            self._task_reader.cancel()

    async def wait_idle(self) -> None:
        """Return once none of this worker's tasks runs or waits for the user (a Boss task
        in the same registry is not this worker's to wait for)."""
        await self.runs.wait_idle(SOURCE)

    async def close(self) -> None:
        """Nothing is left to deliver: each run reported its own result; ``run`` frees Redis."""

    async def run(self, ready: asyncio.Event | None = None) -> None:
        """Serve until cancelled. Raises DuplicateWorker if the worker id is taken."""
        presence = self._presence = WorkerPresence(self.redis, self.worker_id, self.agent_types,
                                                   self.timing.lease_ttl_s, self.fleet.record())
        try:
            await presence.acquire_waiting(self.shared.policy.call, self.timing.lease_ttl_s + LEASE_SLACK_S,
                                           self.timing.heartbeat_s)
            await self.shared.policy.call("fleet", self.fleet.start)
            await self.shared.policy.call("groups", self._ensure_groups)
            self._connected = True
            # The task runs live in a group of their own, so a loop that fails can
            # interrupt their turns (wind_down) before anything cancels them.
            self.runs.threads = self.fleet  # the Boss source's threads are published too
            async with asyncio.TaskGroup() as runs:
                self._tg = runs
                await self._serve(presence, ready)
        except BaseExceptionGroup as group:
            if self._fatal is not None:
                raise self._fatal from None
            raise GatewayError("a gateway loop failed") from group
        finally:
            self._ready = False
            if self.runs.threads is self.fleet:
                self.runs.threads = None
            await self._release(presence)

    async def _serve(self, presence: WorkerPresence, ready: asyncio.Event | None) -> None:
        try:
            # Read before the live readers start: an entry they read is pending too, and
            # one found by both would be dispatched twice.
            own_pending = await self._own_pending()
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self._heartbeat_loop(presence))
                tg.create_task(self._recover(own_pending))
                if self._accepting:
                    self._task_reader = tg.create_task(self._task_loop())
                tg.create_task(self._control_loop())
                tg.create_task(self._reclaim_loop())
                self._ready = True
                logger.info("gateway worker %s serving %s", self.worker_id, ", ".join(self.agent_types))
                if ready is not None:
                    ready.set()
        except Exception:
            self._ready = False
            await self.runs.wind_down(SOURCE, SOURCE_FAILED, WIND_DOWN_S)
            raise

    # --- start and stop ---------------------------------------------------------------
    async def _ensure_groups(self) -> None:
        for stream in (*self._agent_streams, self._control_stream):
            with contextlib.suppress(GroupExists):  # the one XGROUP error to tolerate
                await self.redis.xgroup_create(stream, self.group, id="0", mkstream=True)

    async def _release(self, presence: WorkerPresence) -> None:
        try:
            async with asyncio.timeout(RELEASE_TIMEOUT_S):
                await presence.release()
        except Exception as exc:  # noqa: BLE001 - Redis down at exit: the lease just expires
            logger.warning("could not release the worker lease (%s)", type(exc).__name__)
        await self.redis.aclose()
        await self._reads.aclose()

    async def _heartbeat_loop(self, presence: WorkerPresence) -> None:
        while True:
            await asyncio.sleep(self.timing.heartbeat_s)
            try:
                retaken = await self.shared.policy.call("heartbeat", presence.refresh)
            except DuplicateWorker as exc:
                self._fatal = exc
                raise
            if retaken:  # Redis lost its data: the groups are gone too
                await self.shared.policy.call("groups", self._ensure_groups)
            await self.shared.policy.call("fleet", self.fleet.refresh)

    # --- reading ----------------------------------------------------------------------
    async def _read(self, streams: dict[KeyT, StreamIdT], count: int, block: int | None) -> list[tuple[Entry, Any]]:
        async for attempt in self.shared.policy.retrying("read"):
            with attempt:
                try:
                    reply = await self._reads.xreadgroup(self.group, self.worker_id, streams,
                                                         count=count, block=block)
                except MissingGroup:
                    # Also when the stream was deleted while we were blocked on it
                    # (FLUSHALL, a DEL from outside): the group went with it.
                    logger.error("consumer group %s is missing (Redis restarted or stream "
                                 "deleted); recreating it", self.group)
                    await self._ensure_groups()
                    reply = []
                except Exception:
                    self._connected = False
                    raise
        self._connected = True
        return [(Entry(stream.decode(), eid.decode()), fields)
                for stream, entries in cast(keys.StreamReply, reply or []) for eid, fields in entries]

    async def _task_loop(self) -> None:
        block = self.timing.read_block_ms
        slots = self.shared.slots
        while True:
            # Read only while a slot is free, but hold none during the blocking read: the
            # slots may be shared with the Boss source, which must not wait on our poll.
            await slots.wait_free()
            entries = await self._read({s: ">" for s in self._agent_streams}, slots.free, block)
            for entry, fields in entries:
                await self._dispatch(entry, fields)

    async def _control_loop(self) -> None:
        while True:
            entries = await self._read({self._control_stream: ">"}, CONTROL_BATCH,
                                       self.timing.read_block_ms)
            for entry, fields in entries:
                await self._dispatch(entry, fields)

    async def _own_pending(self) -> list[tuple[Entry, Any]]:
        """Entries this worker id read but never acked (the previous process died)."""
        found: list[tuple[Entry, Any]] = []
        for stream in (*self._agent_streams, self._control_stream):
            last = "0"
            while entries := await self._read({stream: last}, RECOVER_BATCH, None):
                found += entries
                last = entries[-1][0].entry_id
        return found

    async def _recover(self, entries: list[tuple[Entry, Any]]) -> None:
        """Run them (each may wait for a slot, so beside the live readers)."""
        for entry, fields in entries:
            self.shared.stats["recovered"] += 1
            await self._dispatch(entry, fields or {})

    async def _reclaim_loop(self) -> None:
        while True:
            await asyncio.sleep(self.timing.reclaim_interval_s)
            for stream in self._agent_streams:
                await self.shared.policy.call("reclaim", self.reclaimer.round, stream)

    # --- dispatch ---------------------------------------------------------------------
    async def _dispatch(self, entry: Entry, fields: Any) -> None:
        # Nothing an entry holds may escape from here: an exception would end the loop
        # that read it, the gateway, and with it the daemon -- at every restart, since
        # the entry stays pending. Any failure to parse is poison, acked and counted.
        self.fleet.entry_taken()
        try:
            command = wire.parse_command(fields or {})
        except Exception as exc:  # noqa: BLE001 - see above
            bad = exc if isinstance(exc, BadCommand) else BadCommand(
                f"unparsable entry ({type(exc).__name__})")
            await self._guard(self._poison(entry, bad))
            return
        if isinstance(command, wire.Ask):
            assert self._tg is not None
            message_id = command.header.message_id
            if self.runs.knows(SOURCE, message_id):
                # A second copy (a forward or requeue repeated after a crash) of a task that
                # is starting or running here: its start check would race the first copy.
                await self._guard(self.shared.ack(entry))
                self.shared.stats["skipped"] += 1  # counted once acked: dropped for good
                return
            # Admitted now, before the next entry is read: it takes a free slot at once.
            admission = self.runs.admit(SOURCE, message_id,
                                        steer=bool(command.extra_payload.get("targetCodexTurnId")))
            admission.start_in(self._tg, self._start(admission, command, entry, fields), f"ask {message_id}")
        elif isinstance(command, wire.Resume):
            await self._guard(route_resume(self.runs, self.shared, command, entry))
        else:
            await self._guard(route_cancel(self.runs, self.shared, command, entry))

    async def _guard(self, work: Any) -> None:
        """Run one command's handling; a non-retryable error fails that command only."""
        try:
            await work
        except Exception:
            self.shared.stats["errors"] += 1
            logger.exception("gateway command handling failed")

    async def _poison(self, entry: Entry, exc: BadCommand) -> None:
        self.shared.stats["poison"] += 1
        metrics.gateway_poison()
        logger.warning("poison entry on %s acked as failed: %s", entry.stream, exc)
        header = exc.header if isinstance(exc.header, wire.Header) else None
        if header is not None:
            try:
                await Reporter(self.shared, header, entry).finish(
                    "FAILED", code="invalid_command", message=str(exc))
                return
            except Exception:  # noqa: BLE001 - a header that cannot be reported on: just ack
                logger.warning("could not report the poison entry as failed; acking it")
        await self.shared.ack(entry)

    async def _start(self, admission: Admission, ask: wire.Ask, entry: Entry, fields: Any) -> None:
        async with admission as started:  # on every path: out of the registry, slot back
            # Another source may have taken the last slot during the read: an ASK goes back
            # to its stream for an idle peer, else it waits here in line for a slot.
            if not started.ready and entry.stream in self._agent_streams and \
                    await self.fleet.requeue(entry, fields):
                return
            admitted = await started.slot()
            execution = await self._prepare(ask, entry, started.run)
            if execution is None:
                return
            if not admitted:  # cancelled while it waited for a slot: nothing ran
                await self._guard(execution.reporter.finish("CANCELLED", reason=started.run.reason))
                return
            started.register()
            await self._guard(execution.run())

    async def _prepare(self, ask: wire.Ask, entry: Entry, run: Run) -> Execution | None:
        """An Execution to run, or None when the ASK was answered without running."""
        reporter = Reporter(self.shared, ask.header, entry)
        try:
            try:
                task = ask.to_task()
            except TaskRejected as exc:
                self.shared.stats["rejected"] += 1
                await reporter.finish("FAILED", code=exc.code, message=str(exc))
                return None
            except Exception as exc:  # noqa: BLE001 - any other failure: poison, see _dispatch
                await self._poison(entry, BadCommand(f"unusable task ({type(exc).__name__})",
                                                     ask.header))
                return None
            verdict, stored = await classify_start(self.shared, ask.header)
            record, reporter.stored = stored.record or {}, stored
            if verdict == "skip":
                await self.shared.ack(entry)
                self.shared.stats["skipped"] += 1  # counted once acked: dropped for good
            elif verdict == "cancelled":
                await reporter.finish("CANCELLED", reason=str(record.get("cancel_reason") or "cancelled"))
            elif verdict == "orphaned":
                logger.warning("a task started by a worker that is gone is reported failed, not re-run")
                await reporter.finish("FAILED", code="agent_restarted",
                                      message="the worker running this task stopped; it was not re-run")
            elif routed := await self.fleet.admit(ask, entry):  # None: forwarded or failed
                return Execution(self.shared, routed, task if routed is ask else routed.to_task(),
                                 entry, run, stored if routed.header == ask.header else None)
        except Exception:
            self.shared.stats["errors"] += 1
            logger.exception("could not start a gateway task")
        return None
