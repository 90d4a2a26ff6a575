"""Who is online and what ran where: the worker lease, membership sets, execution records.

The lease (``registry:worker:online:{id}``) is taken with SET NX, so a second process
with the same worker id fails at start and never touches the first one's lease or
membership. A refresh is one GETEX (the TTL extended, the value read back to see whose
lease it is); only a changed value (a ``[projects]`` reload) is written, by a
compare-and-set script. Execution records live in the
session registry hash exactly where by-framework's ``WorkerRegistry`` looks for
them (``exec:{execution_id}`` and ``msg_map:{message_id}``), so the SDK's
``GatewayClient.cancel_task`` finds this worker and cascades. A record is changed by a
compare-and-set script on its one field: the client marks CANCELLING in the same hash
while we mark RUNNING, and neither write may lose the other. A writer that knows what it
last read or wrote there (``Stored``) writes with that one script, no read first: a
task's start claim and its end are four commands each (bench row 14).

"Registry" here is by-framework's word for these Redis keys (``registry:…``). It is
not the daemon's ``RunRegistry`` (``sources/inflight.py``: the runs in flight, in
memory) nor the fleet's thread publication (``contract.FleetThreads``: which worker
holds a Codex thread, ``fleet.py``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis

from boss_agent.errors import DuplicateWorker
from boss_agent.lifecycles import EXECUTION, TERMINAL_EXECUTION, ExecutionStatus
from boss_agent.sources.gateway import keys
from boss_agent.sources.gateway.wire import now_ms

logger = logging.getLogger(__name__)

CAS_ATTEMPTS = 20  # a record changes a few times a second at most

# Refresh the lease only while it still carries our token; re-take it if it vanished
# (Redis restarted without persistence). Returns 1 refreshed, 2 re-taken, 0 lost.
_REFRESH = """
local cur = redis.call('GET', KEYS[1])
if not cur then
  redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3]) return 2
end
if string.find(cur, ARGV[1], 1, true) then
  redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3]) return 1
end
return 0
"""
_RELEASE = """
local cur = redis.call('GET', KEYS[1])
if cur and string.find(cur, ARGV[1], 1, true) then redis.call('DEL', KEYS[1]) return 1 end
return 0
"""


class WorkerPresence:
    """This process's claim on its worker id, and its agent-type membership."""

    def __init__(self, redis: aioredis.Redis, worker_id: str, agent_types: tuple[str, ...],
                 lease_ttl_s: int, record: dict[str, Any] | None = None) -> None:
        self.redis = redis
        self.record = dict(record or {})  # extra lease fields peers route by (fleet.py)
        self.worker_id = worker_id
        self.agent_types = agent_types
        self.lease_ttl_s = lease_ttl_s
        self.token = uuid.uuid4().hex
        self._key = keys.worker_lease(worker_id)
        self._mine = f'"token":"{self.token}"'
        self._written: dict[str, Any] | None = None  # the record the stored value carries

    def _value(self) -> str:
        return json.dumps({"version": 1, "token": self.token, "last_seen": now_ms(), **self.record},
                          separators=(",", ":"))

    async def acquire(self) -> None:
        """Take the lease or raise DuplicateWorker, leaving the holder's keys alone."""
        record = dict(self.record)
        if not await self.redis.set(self._key, self._value(), nx=True, ex=self.lease_ttl_s):
            raise DuplicateWorker(f"worker id {self.worker_id!r} is held by another live process")
        self._written = record
        await self._register()

    async def acquire_waiting(self, call: Callable[..., Awaitable[Any]], wait_s: float,
                              poll_s: float) -> None:
        """Take the lease, waiting up to ``wait_s`` when it is held (``call`` retries Redis).

        A daemon restarted right after a SIGKILL finds its own predecessor's lease,
        which nobody refreshes and which expires within one TTL; a live peer keeps
        refreshing its lease, so after that wait the id is really taken.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        for attempt in itertools.count():
            try:
                await call("lease", self.acquire)
                return
            except DuplicateWorker:
                if loop.time() >= deadline:
                    raise
                if attempt == 0:
                    logger.warning("worker id %s still has a lease (a killed predecessor?); "
                                   "waiting for it to expire", self.worker_id)
                await asyncio.sleep(poll_s)

    async def refresh(self) -> bool:
        """Extend the lease; True when it had vanished and was taken again.

        An idle fleet's Redis traffic is mostly this, every ``heartbeat_s`` per worker
        (bench row 14), so the usual beat is one command: GETEX extends the TTL and
        returns the value. ``last_seen`` is then the time the value was written (by
        SDK clients it is only checked to be set); a changed record is written with
        the compare-and-set script. A lease found holding another token was taken
        while this process stalled past its TTL: the GETEX gave that live holder one
        TTL from now, and this process stops (DuplicateWorker) as before.
        """
        record = dict(self.record)
        if self._written != record:
            outcome = await self.redis.eval(_REFRESH, 1, self._key, self._mine, self._value(),
                                            self.lease_ttl_s)
        else:
            current = await self.redis.getex(self._key, ex=self.lease_ttl_s)
            if current is None:
                taken = await self.redis.set(self._key, self._value(), nx=True, ex=self.lease_ttl_s)
                outcome = 2 if taken else 0
            else:
                outcome = 1 if self._mine in keys.text(current) else 0
        if outcome:
            self._written = record  # the value stored carries this record
        if outcome == 0:
            raise DuplicateWorker(f"worker id {self.worker_id!r} was taken by another process")
        if outcome == 2:
            # Redis lost its data (a restart without persistence): the membership too.
            logger.warning("worker lease had vanished (Redis restarted?); taken again")
            await self._register()
        return bool(outcome == 2)

    async def _register(self) -> None:
        # At start, and again whenever the lease had vanished: a Redis that lost the
        # lease lost the membership sets with it.
        pipe = self.redis.pipeline(transaction=False)
        pipe.sadd(keys.KNOWN_WORKERS, self.worker_id)
        for agent_type in self.agent_types:
            pipe.sadd(keys.worker_agent_types(self.worker_id), agent_type)
            pipe.sadd(keys.agent_type_members(agent_type), self.worker_id)
        await pipe.execute()

    async def release(self) -> None:
        """Drop the lease and membership, but only if the lease is still ours."""
        if not await self.redis.eval(_RELEASE, 1, self._key, self._mine):
            return
        pipe = self.redis.pipeline(transaction=False)
        pipe.srem(keys.KNOWN_WORKERS, self.worker_id)
        pipe.delete(keys.worker_agent_types(self.worker_id))
        for agent_type in self.agent_types:
            pipe.srem(keys.agent_type_members(agent_type), self.worker_id)
        await pipe.execute()


async def worker_online(redis: aioredis.Redis, worker_id: str) -> bool:
    return bool(await redis.exists(keys.worker_lease(worker_id)))


def _decode(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


# Write one execution record if it still reads as the writer last saw it (a compare-and-set
# on that one field: the client marks CANCELLING in the same hash while we mark RUNNING,
# and neither write may lose the other). KEYS[1] the session registry; ARGV: the record's
# execution id ('' = follow msg_map), the text expected there ('' = none), the msg_map
# field, the exec field prefix, the new execution id, the new text, the TTL.
# Returns {1} written, or {0, execution id, text} as found, for the writer to try again.
_COMPARE_AND_SET = """
local id = ARGV[1]
if id == '' then id = redis.call('HGET', KEYS[1], ARGV[3]) or '' end
local cur = ''
if id ~= '' then cur = redis.call('HGET', KEYS[1], ARGV[4] .. id) or '' end
if cur ~= ARGV[2] then return {0, id, cur} end
redis.call('HSET', KEYS[1], ARGV[4] .. ARGV[5], ARGV[6], ARGV[3], ARGV[5])
redis.call('EXPIRE', KEYS[1], ARGV[7])
return {1}
"""


@dataclass(frozen=True)
class Stored:
    """One execution record as Redis held it when last read or written by this worker.

    ``text`` is the field's exact value, what a compare-and-set expects to find there;
    ``execution_id`` and ``text`` are empty when there was no record.
    """

    execution_id: str = ""
    text: str = ""

    @property
    def record(self) -> dict[str, Any] | None:
        return _decode(self.text) if self.text else None


NO_RECORD = Stored()


class ExecutionRecords:
    """Execution records in the session registry, the SDK's layout."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis

    async def read(self, session_id: str, message_id: str) -> Stored:
        """The record ``msg_map:{message_id}`` points to (two HGETs), or NO_RECORD."""
        stored = await self._read(keys.session_registry(session_id), message_id, None)
        return stored if stored.text else NO_RECORD

    async def get(self, session_id: str, message_id: str) -> dict[str, Any] | None:
        return (await self.read(session_id, message_id)).record

    async def find(self, session_id: str, message_id: str, status: str) -> dict[str, Any] | None:
        """A record of ``message_id`` in ``status``, wherever ``msg_map`` points.

        The SDK client's ``send_message(action_type="RESUME")`` writes a fresh QUEUED
        record and re-points ``msg_map`` at it, so the suspended task's own record is
        found by scanning the session's records (a session holds a handful).
        """
        found = await self.get(session_id, message_id)
        if found and found.get("status") == status:
            return found
        everything = await self.redis.hgetall(keys.session_registry(session_id))
        for name, raw in everything.items():
            record = _decode(raw) if keys.text(name).startswith(keys.EXEC_FIELD) else None
            if record and record.get("message_id") == message_id and record.get("status") == status:
                return record
        return None

    async def update(
        self, session_id: str, message_id: str,
        mutate: Callable[[dict[str, Any] | None], dict[str, Any] | None],
        execution_id: str | None = None, known: Stored | None = None,
    ) -> Stored:
        """Atomically read-modify-write one record; ``mutate`` returns None to leave it.

        The record is the one ``msg_map:{message_id}`` points to, or ``execution_id``'s
        when given (a task keeps its own record even after a RESUME re-pointed the map).
        ``known`` is the record as this worker last read or wrote it: the write is then
        one compare-and-set (four commands) with no read before it, and a record changed
        since is read back by the same script and ``mutate`` applied to it again.
        Returns the record as written (or as found, when mutate declined).
        """
        reg = keys.session_registry(session_id)
        current = known if known is not None else await self._read(reg, message_id, execution_id)
        for _ in range(CAS_ATTEMPTS):
            new = mutate(current.record)
            if new is None:
                return current
            new_id = new.get("execution_id")
            if not keys.valid_id(new_id):
                new_id = new["execution_id"] = f"exec-{uuid.uuid4().hex[:8]}"
            text = json.dumps(new, ensure_ascii=False)
            # EVAL, not EVALSHA: Redis keeps the compiled script by its digest either way,
            # and a Redis restarted without the script cache needs no reload step.
            reply = await self.redis.eval(
                _COMPARE_AND_SET, 1, reg, current.execution_id, current.text,
                keys.MSG_MAP_FIELD + message_id, keys.EXEC_FIELD, new_id, text, keys.SESSION_TTL_S)
            if int(reply[0]) == 1:
                return Stored(str(new_id), text)
            current = Stored(keys.text(reply[1]), keys.text(reply[2]))
        raise RuntimeError("execution record kept changing under us")

    async def _read(self, reg: str, message_id: str, execution_id: str | None) -> Stored:
        if execution_id is None:
            found = await self.redis.hget(reg, keys.MSG_MAP_FIELD + message_id)
            if found is None:
                return NO_RECORD
            execution_id = keys.text(found)
        raw = await self.redis.hget(reg, keys.EXEC_FIELD + execution_id)
        return Stored(execution_id, keys.text(raw) if raw is not None else "")


def with_status(record: dict[str, Any], status: str, **fields: Any) -> dict[str, Any]:
    """``record`` moved to ``status``, timeline appended, timestamps kept like the SDK.

    A move the execution lifecycle does not allow raises ``IllegalTransition``; a
    status this lifecycle does not know (another SDK worker's) is not ours to judge.
    """
    old = record.get("status")
    if isinstance(old, str) and old in ExecutionStatus.__members__.values():
        EXECUTION.check(old, status)
    now = now_ms()
    record.update(fields)
    if record.get("status") != status:
        record.setdefault("timeline", []).append({"status": status, "timestamp": now})
    record["status"] = status
    record["updated_at"] = now
    record.setdefault("created_at", now)
    if status == ExecutionStatus.RUNNING and not record.get("started_at"):
        record["started_at"] = now
    if status in TERMINAL_EXECUTION:
        record["finished_at"] = now
    return record
