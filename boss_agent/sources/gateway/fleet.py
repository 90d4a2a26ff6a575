"""A fleet on one Redis: which worker holds a thread, a live turn, a project.

Codex threads live on the device that ran them (their rollouts are on its disk), so
a follow-up or a steer must reach that device. Each worker publishes:

- ``registry:thread:{codexThreadRef}`` → its worker id, for every thread it holds,
  with the lease's TTL and refreshed with the lease (a dead worker's keys vanish
  with its lease). The set of held threads is also published in
  ``registry:worker:threads:{worker_id}`` (7 days, like sessions), rewritten whole
  at each refresh.

Only threads this worker ran are held, and never without bound: at most
``MAX_HELD_THREADS``, the least recently used going first, and a thread unused for
``HELD_THREAD_IDLE_S`` is let go. The list a restarted worker publishes again comes
from its own state dir (``held_threads_file``), never from Redis, where any client
could plant ids.
- ``registry:turn:{turnId}`` → its worker id while that turn runs (a steer names
  only the turn).
- ``projects`` (ids only, never paths) in its lease record.

``admit`` runs before an ASK is started: it returns the ASK to run here, or
forwards it to the live holder's own stream (like a RESUME) or fails it
``thread_not_found`` / ``project_not_found``, and returns None. A
``thread_collaboration`` names two threads (it reads one and turns on the other): it
runs where both are held, and fails ``thread_not_found`` when no one live worker
holds both. An ASK read from
this worker's own stream was already routed once and is never forwarded again, so
two workers that disagree for a moment cannot bounce it between them.

A worker that advertises no projects takes any ``projectId`` (a device that predates
project routing keeps working); one that lists projects takes only those.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

from boss_agent.errors import RedisFailure, RedisUnavailable, WrongType
from boss_agent.identity import write_atomic
from boss_agent.sources.gateway import keys, wire
from boss_agent.sources.gateway.execution import Entry, Reporter, Shared
from boss_agent.sources.gateway.probe import group_pending

logger = logging.getLogger(__name__)

THREAD_NOT_FOUND = "thread_not_found"
PROJECT_NOT_FOUND = "project_not_found"
# Every lease refresh (5 s) re-sets one key per held thread: a thousand SETs in one
# pipeline is a few ms for Redis and for us, and more threads than that on one device
# have mostly not been continued for long.
MAX_HELD_THREADS = 1_000
# A thread nobody continued for a week is let go: by then its session stream and
# execution records have expired in Redis too (keys.SESSION_TTL_S).
HELD_THREAD_IDLE_S = float(keys.SESSION_TTL_S)
HELD_THREADS_DIR = "gateway"  # under the state dir: threads-<worker id>.json


def held_threads_file(state_dir: Path, worker_id: str) -> Path:
    """Where a worker keeps the threads it ran, for its next start."""
    return state_dir / HELD_THREADS_DIR / f"threads-{worker_id}.json"


def lease_projects(raw: Any) -> set[str]:
    """The project ids a lease record advertises (empty for an old or damaged one)."""
    try:
        value = json.loads(raw) if raw is not None else {}
    except ValueError:
        return set()
    projects = value.get("projects") if isinstance(value, dict) else None
    return {p for p in projects if isinstance(p, str)} if isinstance(projects, list) else set()


class Fleet:
    """This worker's threads, live turns and projects, and the routing built on them."""

    def __init__(self, shared: Shared, lease_ttl_s: int, projects: Iterable[str] = (),
                 agent_streams: Iterable[str] = (), store: Path | None = None, *,
                 max_threads: int = MAX_HELD_THREADS, idle_s: float = HELD_THREAD_IDLE_S,
                 clock: Callable[[], float] = time.time) -> None:
        self.shared = shared
        self.redis: aioredis.Redis = shared.redis
        self.worker_id = shared.worker_id
        self.lease_ttl_s = lease_ttl_s
        self.projects: frozenset[str] = frozenset()
        self.set_projects(projects)
        # Held thread -> when it was last used (clock seconds), least recent first.
        self.threads: dict[str, float] = {}
        self.store = store  # the file that carries them to the next start; None: memory only
        self.max_threads = max_threads
        self.idle_s = idle_s
        self.clock = clock
        self._stored: frozenset[str] | None = None  # the threads the file holds, when known
        self._store_lock = asyncio.Lock()  # one write at a time (write_atomic's temp name)
        self.turns: dict[str, str] = {}  # live turn id -> its thread
        self._own_stream = keys.worker_stream(self.worker_id)
        self._agent_streams = tuple(agent_streams)
        self.pending: int | None = None  # entries this worker read and has not acked yet
        self._published = True  # the Redis set may hold ids (a predecessor's, at start)
        self._recount = True  # an entry reached this worker since the last count

    def status(self) -> dict[str, Any]:
        return {"group": self.shared.group, "lease_ttl_s": self.lease_ttl_s, "pending": self.pending,
                "threads": len(self.threads), "live_turns": len(self.turns),
                "projects": sorted(self.projects)}

    def record(self) -> dict[str, Any]:
        """Merged into the lease value: what peers route by."""
        return {"projects": sorted(self.projects)}

    def set_projects(self, projects: Iterable[str]) -> None:
        """A reload changed ``[projects]``: route by the new ids (the lease follows)."""
        self.projects = frozenset(p for p in projects if keys.valid_id(p))

    # --- publishing ---------------------------------------------------------------------
    async def start(self) -> None:
        """Take back the threads an earlier process with this worker id ran (from its
        own file: the set in Redis is only published, never trusted)."""
        loaded = await asyncio.to_thread(self._load) if self.store is not None else {}
        for thread, used in sorted(loaded.items(), key=lambda kv: kv[1]):
            self.threads[thread] = used
        self._stored = frozenset(self.threads)
        await self.refresh()

    def _load(self) -> dict[str, float]:
        assert self.store is not None
        try:
            data = json.loads(self.store.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            logger.warning("the file of held threads is unreadable (%s); starting without it",
                           type(exc).__name__)
            return {}
        threads = data.get("threads") if isinstance(data, dict) else None
        if not isinstance(threads, dict):
            return {}
        held = {t: float(u) for t, u in threads.items()
                if keys.valid_id(t) and isinstance(u, (int, float)) and not isinstance(u, bool)}
        newest = sorted(held.items(), key=lambda kv: kv[1])[-self.max_threads:]
        return dict(newest)

    def _forget_idle(self) -> None:
        """Let go of the threads unused for ``idle_s`` (never one with a live turn)."""
        cutoff = self.clock() - self.idle_s
        live = set(self.turns.values())
        for thread, used in list(self.threads.items()):
            if used >= cutoff:
                break  # least recent first: the rest were used later
            if thread not in live:
                del self.threads[thread]

    async def _save(self, *, used: bool = False) -> None:
        """Write the held threads to the store: after a use (``used``: a task started
        or ended, a few writes per task), else only when the set changed."""
        if self.store is None or (not used and frozenset(self.threads) == self._stored):
            return
        async with self._store_lock:
            snapshot = dict(self.threads)
            data = json.dumps({"version": 1, "threads": snapshot}, separators=(",", ":")).encode()
            try:
                await asyncio.to_thread(self._write, data)
            except OSError as exc:  # a full disk costs the next start these threads, not the worker
                logger.warning("cannot write the file of held threads (%s)", exc.strerror)
                return
            self._stored = frozenset(snapshot)

    def _write(self, data: bytes) -> None:
        assert self.store is not None
        self.store.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_atomic(self.store, data)

    async def refresh(self) -> None:
        """Re-set every key this worker publishes; called with each lease refresh."""
        self._forget_idle()
        pipe = self.redis.pipeline(transaction=False)
        for thread in self.threads:
            pipe.set(keys.thread_holder(thread), self.worker_id, ex=self.lease_ttl_s)
        # Rewritten whole: ids another client added there are not ours to publish. Holding
        # none, and having published none since the last rewrite, there is nothing to
        # clear of ours: an idle worker's beat sends nothing here (bench row 14).
        if self.threads or self._published:
            pipe.delete(keys.held_threads(self.worker_id))
        if self.threads:
            pipe.sadd(keys.held_threads(self.worker_id), *self.threads)
            pipe.expire(keys.held_threads(self.worker_id), keys.SESSION_TTL_S)
        self._published = bool(self.threads)
        for turn in self.turns:
            pipe.set(keys.turn_holder(turn), self.worker_id, ex=self.lease_ttl_s)
        await _execute(pipe)
        await self._save()
        await self._count_pending()

    def entry_taken(self) -> None:
        """An entry was read or claimed: this worker's pending count may have grown."""
        self._recount = True

    async def _count_pending(self) -> None:
        if not self._recount and self.pending == 0:
            return  # none pending and none taken since: still none (an idle beat asks nothing)
        self._recount = False
        counts = [await group_pending(self.redis, stream, self.shared.group, self.worker_id)
                  for stream in self._agent_streams]
        # A missing group (Redis restarted) is recreated by the reader; count nothing till then.
        self.pending = sum(c["mine"] for c in counts if c is not None)

    async def turn_started(self, thread_ref: str, turn_id: str) -> None:
        """Publish the thread and the live turn before any client can learn their ids."""
        if not (keys.valid_id(thread_ref) and keys.valid_id(turn_id)):
            return
        self.turns[turn_id] = thread_ref
        # The live turn first: whoever sees the thread held here can steer its turn at once
        # (hold() also writes the held list to disk before it returns).
        await self.redis.set(keys.turn_holder(turn_id), self.worker_id, ex=self.lease_ttl_s)
        await self.hold(thread_ref)

    async def hold(self, thread_ref: str | None) -> None:
        """A thread this worker ran: held (most recently used), published, and stored."""
        if not thread_ref or not keys.valid_id(thread_ref):
            return
        self.threads.pop(thread_ref, None)
        self.threads[thread_ref] = self.clock()
        dropped = self._over_cap()
        pipe = self.redis.pipeline(transaction=False)
        pipe.set(keys.thread_holder(thread_ref), self.worker_id, ex=self.lease_ttl_s)
        pipe.sadd(keys.held_threads(self.worker_id), thread_ref)
        self._published = True
        if dropped:
            pipe.srem(keys.held_threads(self.worker_id), *dropped)
        pipe.expire(keys.held_threads(self.worker_id), keys.SESSION_TTL_S)
        await _execute(pipe)
        await self._save(used=True)

    def _over_cap(self) -> list[str]:
        """Past ``max_threads``, the least recently used go (never one with a live turn);
        their keys expire with the lease TTL."""
        dropped: list[str] = []
        live = set(self.turns.values())
        for thread in list(self.threads):
            if len(self.threads) <= self.max_threads:
                break
            if thread not in live:
                del self.threads[thread]
                dropped.append(thread)
        return dropped

    async def task_ended(self, thread_ref: str | None, turn_id: str | None) -> None:
        """The turn is over (the thread stays held: its rollout is on this device)."""
        await self.hold(thread_ref)
        if turn_id and self.turns.pop(turn_id, None) is not None:
            await self.redis.delete(keys.turn_holder(turn_id))

    # --- routing ------------------------------------------------------------------------
    async def admit(self, ask: wire.Ask, entry: Entry) -> wire.Ask | None:
        """The ASK to run on this worker, or None when it was forwarded or failed."""
        extra = ask.extra_payload
        thread, turn = _text(extra.get("codexThreadRef")), _text(extra.get("targetCodexTurnId"))
        if thread or turn:
            return await self._by_thread(ask, entry, thread, turn)
        pair = [t for t in (_text(extra.get("targetCodexThreadRef")), _text(extra.get("sourceCodexThreadRef"))) if t]
        if pair:
            return await self._by_threads(ask, entry, pair)
        project = _text(extra.get("projectId"))
        if project and self.projects and project not in self.projects:
            return await self._by_project(ask, entry, project)
        return ask

    async def _by_thread(self, ask: wire.Ask, entry: Entry, thread: str, turn: str) -> wire.Ask | None:
        if turn in self.turns:
            if not thread:  # a steer that names only the turn: the runner needs its thread
                return _with_extra(ask, codexThreadRef=self.turns[turn])
            return ask
        if thread in self.threads:
            return ask
        holder = (await self._holder(keys.turn_holder(turn) if keys.valid_id(turn) else None)
                  or await self._holder(keys.thread_holder(thread) if keys.valid_id(thread) else None))
        if holder == self.worker_id:
            return ask
        if holder and entry.stream != self._own_stream:
            await self._forward(ask, entry, holder)
            return None
        await self._fail(ask, entry, THREAD_NOT_FOUND, "no live worker holds this Codex thread or turn")
        return None

    async def _by_threads(self, ask: wire.Ask, entry: Entry, threads: list[str]) -> wire.Ask | None:
        """A collaboration: every thread it names must be on the worker that runs it."""
        holders = {self.worker_id if t in self.threads else
                   await self._holder(keys.thread_holder(t) if keys.valid_id(t) else None) for t in threads}
        if holders == {self.worker_id}:
            return ask
        if len(holders) == 1 and "" not in holders and entry.stream != self._own_stream:
            await self._forward(ask, entry, holders.pop())
            return None
        await self._fail(ask, entry, THREAD_NOT_FOUND, "no live worker holds every thread this task names")
        return None

    async def _holder(self, key: str | None) -> str:
        """The live worker a registry key names, or ''."""
        if key is None:
            return ""
        try:
            raw = await self.redis.get(key)
        except WrongType:  # not a string: not a registry entry we wrote
            return ""
        holder = keys.text(raw) if raw else ""
        if holder and holder != self.worker_id and not await self.redis.exists(keys.worker_lease(holder)):
            return ""
        return holder

    async def _by_project(self, ask: wire.Ask, entry: Entry, project: str) -> wire.Ask | None:
        agent_type = ask.header.target_agent_type or self.shared.default_agent_type
        # Forwarded here already: never again (two workers must not pass it back and forth).
        forwarded = entry.stream == self._own_stream
        peers = [] if forwarded else await self.workers_with_project(agent_type, project)
        if peers:
            await self._forward(ask, entry, random.choice(peers))
            return None
        await self._fail(ask, entry, PROJECT_NOT_FOUND, "no live worker serves this project")
        return None

    async def workers_with_project(self, agent_type: str, project: str) -> list[str]:
        """Live peers of ``agent_type`` whose lease advertises ``project``."""
        peers = await self._peers(agent_type)
        if not peers:
            return []
        leases = await self.redis.mget([keys.worker_lease(p) for p in peers])
        return [p for p, lease in zip(peers, leases, strict=True) if project in lease_projects(lease)]

    async def requeue(self, entry: Entry, fields: Any) -> bool:
        """Put back an ASK read just as this worker's last slot was taken; True when done.

        The reader may sit in a blocking read while a forwarded task takes the slot; the
        ASK it then gets would wait here while a peer idles. When a live peer serves
        the agent type, the entry goes back on its stream (same fields, same message id)
        and ours is acked. A crash between the two leaves a duplicate, which the
        execution record turns into a skip.
        """
        if not _is_ask(fields):
            return False
        try:
            if not await self._has_live_peer(entry.stream):
                return False
            await self.shared.policy.call("requeue", self.redis.xadd, entry.stream, fields)
            await self.shared.ack(entry)
        except Exception as exc:  # noqa: BLE001 - keep the task here, waiting for a slot
            logger.warning("could not put a task back for a peer (%s)", type(exc).__name__)
            return False
        self.shared.stats["requeued"] += 1
        return True

    async def _has_live_peer(self, stream: str) -> bool:
        peers = await self._peers(stream.rsplit(":", 1)[-1])
        return bool(peers) and bool(await self.redis.exists(*[keys.worker_lease(p) for p in peers]))

    async def _peers(self, agent_type: str) -> list[str]:
        """The other members of ``agent_type`` (live or not: check their leases)."""
        try:
            members = map(keys.text, await self.redis.smembers(keys.agent_type_members(agent_type)))
        except WrongType:  # not a set: no peers we can know of
            return []
        return sorted(m for m in members if m != self.worker_id and keys.valid_id(m))

    async def _forward(self, ask: wire.Ask, entry: Entry, worker: str) -> None:
        body = {"content": ask.content, "wait_for_reply": True, "extra_payload": ask.extra_payload}
        command = {"action_type": wire.ASK_AGENT, "header": ask.header.to_wire(), "body": body}
        await self.shared.policy.call("forward", self.redis.xadd, keys.worker_stream(worker),
                                      {"data": json.dumps(command)})
        await self.shared.ack(entry)
        self.shared.stats["forwarded"] += 1
        logger.info("task forwarded to worker %s, which holds its thread or project", worker)

    async def _fail(self, ask: wire.Ask, entry: Entry, code: str, message: str) -> None:
        self.shared.stats["rejected"] += 1
        await Reporter(self.shared, ask.header, entry).finish("FAILED", code=code, message=message)


async def _execute(pipe: Any) -> None:
    """Run a pipeline of registry writes; a key of the wrong type spoils only its command.

    Anyone who can write to Redis can clobber these keys; that must cost the routing
    of one thread, never the worker. Connection errors still raise (and are retried).
    """
    for result in await pipe.execute(raise_on_error=False):
        if isinstance(result, RedisFailure) and not isinstance(result, RedisUnavailable):
            logger.warning("a fleet registry write failed: %s", result)


def _text(value: Any) -> str:
    """A routing field as a string ('' when absent; the task parser already refused non-strings)."""
    return value if isinstance(value, str) else ""


def _is_ask(fields: Any) -> bool:
    try:
        raw = json.loads(fields.get(b"data", fields.get("data")))
    except (TypeError, ValueError, AttributeError):
        return False
    return isinstance(raw, dict) and raw.get("action_type") == wire.ASK_AGENT


def _with_extra(ask: wire.Ask, **fields: Any) -> wire.Ask:
    return wire.Ask(ask.header, ask.content, {**ask.extra_payload, **fields})
