"""The Boss control plane as a task source: heartbeat, claim, run, report.

``BossSource`` wires the pieces of this package for one paired device and runs their
loops and its task runs in its own task group (``run``: the ``TaskSource`` contract;
the daemon supervises it and restarts a fresh one when it fails). It keeps the revoked-token state: a 401
anywhere stops claiming and heartbeats (results stay spooled) until the token file
changes, i.e. the user paired again, instead of crash-looping.

While every slot is busy but a turn runs, the device still claims, with ``slots: 0``:
the server then hands over only steer tasks, which join a running turn and take no
slot (device API §3). That claim is never cancelled when a slot frees (a task the
server handed over in the meantime would be lost); a normal claim starts beside it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from boss_agent import __version__
from boss_agent.aio import race, until_set
from boss_agent.errors import BossApiError, Unauthorized
from boss_agent.identity import Identity, identity_stamp, load_identity
from boss_agent.sources.boss.api import CLAIM_WAIT_MS, BossApi
from boss_agent.sources.boss.remote_approvals import RemoteApprovals
from boss_agent.sources.boss.flusher import SpoolFlusher
from boss_agent.sources.boss.heartbeat import (
    HeartbeatLoop,
    clamp_interval_s,
    watch_clock,
)
from boss_agent.sources.boss.retry import BossApiRetry
from boss_agent.sources.boss.runs import SOURCE, TaskRuns
from boss_agent.sources.boss.spool import CompletionSpool, RunningJournal, keep_written
from boss_agent.sources.inflight import SOURCE_FAILED, WIND_DOWN_S, Run, RunRegistry
from boss_agent.tasks import TaskRunner

logger = logging.getLogger(__name__)

REPAIR_CHECK_S = 5.0  # while unpaired, how often the token file is checked for a new pairing
CLAIM_REFUSED_PAUSE_S = 60.0  # after a non-retryable claim error: log once a minute, not spin
FINAL_FLUSH_S = 5.0  # shutdown stays bounded; the spool survives for the next start
# The longest the next claim waits for the claimed tasks' runners to begin (well under a
# millisecond: the bound is for one that never does).
START_FIRST_S = 1.0
# The longest the state heartbeat waits for their first progress upload (the first
# words, or the first card a coalescing window after the start: 0.25 s).
STATE_AFTER_S = 2.0


class BossSource:
    name = SOURCE

    def __init__(self, state_dir: Path, identity: Identity, runner: TaskRunner, *,
                 max_concurrent: int, approval_timeout_s: float,
                 capabilities: Callable[[], dict[str, Any]],
                 system: Callable[[], dict[str, Any]],
                 policy: BossApiRetry | None = None, claim_wait_ms: int = CLAIM_WAIT_MS,
                 clock: Callable[[], float] | None = None,
                 registry: RunRegistry | None = None) -> None:
        self.state_dir = state_dir
        self.identity = identity
        self.policy = policy or BossApiRetry()
        self.claim_wait_ms = claim_wait_ms
        self.clock = clock
        self.api = self._new_api(identity)
        self.spool = CompletionSpool(state_dir)
        self.journal = RunningJournal(state_dir)
        self.capabilities = capabilities
        self.system = system
        self.authorized = asyncio.Event()
        self.authorized.set()
        self.revoked = asyncio.Event()  # the complement of ``authorized``, for waiters
        self.draining = False
        self.flusher = SpoolFlusher(lambda: self.api, self.spool, self.mark_unauthorized)
        self.approvals = RemoteApprovals(self.api, approval_timeout_s)
        self.runs = TaskRuns(runner, self.api, self.spool, self.journal, self.approvals,
                             max_concurrent, self.flusher.wake, registry)
        self.heartbeat = HeartbeatLoop(
            lambda body: self.api.heartbeat(body), self.heartbeat_body, self.runs.cancel,
            self.mark_unauthorized, clamp_interval_s(identity.heartbeat_interval_ms, 15.0))
        self._stamp = identity_stamp(state_dir)
        self._loops: list[asyncio.Task[None]] = []
        self._claim: asyncio.Task[None] | None = None
        self._steer_claim: asyncio.Task[None] | None = None

    def _new_api(self, identity: Identity) -> BossApi:
        return BossApi(identity.server_url, device_id=identity.device_id, token=identity.token,
                       policy=self.policy)

    # ----------------------------------------------------------------- state

    @property
    def paired(self) -> bool:
        return self.authorized.is_set()

    def mark_unauthorized(self) -> None:
        if self.authorized.is_set():
            logger.error("the server rejected the device token (revoked?); run `boss-agent pair` "
                         "again. Claiming stopped; results stay spooled.")
        self.authorized.clear()
        self.revoked.set()

    @property
    def spool_degraded(self) -> bool:
        """The disk refused a spool or journal write; those records wait in memory."""
        return self.spool.degraded or self.journal.degraded

    def state(self) -> str:
        if self.draining:
            return "draining"
        return "busy" if self.runs.free_slots == 0 else "idle"

    def heartbeat_body(self) -> dict[str, Any]:
        return {"agentVersion": __version__, "state": self.state(),
                "runningTaskIds": self.runs.running_ids(),
                "maxConcurrentTasks": self.runs.max_concurrent,
                "capabilities": self.capabilities(), "system": self.system()}

    def status(self) -> dict[str, Any]:
        """The source's part of the state file that `boss-agent status` reads (the
        ``TaskSource`` contract)."""
        last = self.heartbeat.last or {}
        return {
            "paired": self.paired, "unpaired": not self.paired,
            "server_url": self.identity.server_url, "device_id": self.identity.device_id,
            "running_task_ids": self.runs.running_ids(), "spooled_reports": len(self.spool),
            "spool_degraded": self.spool_degraded, "spool_refused": self.flusher.status(),
            "last_heartbeat_at": last.get("at"),
            "last_heartbeat_result": None if not last else ("ok" if last.get("ok") else last.get("error")),
        }

    # ----------------------------------------------------------------- loops

    async def run(self, ready: asyncio.Event) -> None:
        """Serve until cancelled (the ``TaskSource`` contract).

        The task runs live in a group of their own, so a loop that fails can interrupt
        their turns (``wind_down``) before anything cancels them.
        """
        async with asyncio.TaskGroup() as runs:
            try:
                async with asyncio.TaskGroup() as loops:
                    self.start(loops, runs)
                    ready.set()
            except Exception:
                await self.runs.registry.wind_down(SOURCE, SOURCE_FAILED, WIND_DOWN_S)
                raise

    def start(self, tg: asyncio.TaskGroup, runs: asyncio.TaskGroup | None = None) -> None:
        """Recover a dead daemon's tasks, then start every loop in ``tg`` (runs in ``runs``)."""
        self.journal.recover(self.spool)
        self._claim = tg.create_task(self._claim_loop(runs or tg), name="boss claim")
        self._loops = [
            self._claim,
            tg.create_task(self.heartbeat.run(self.authorized), name="boss heartbeat"),
            tg.create_task(self.flusher.run(self.authorized), name="boss spool"),
            tg.create_task(keep_written(self.spool, self.journal), name="boss spool disk"),
            tg.create_task(self._repair_watch(), name="boss pairing watch"),
            tg.create_task(watch_clock(self.on_resume, wall=self.clock or time.time),
                           name="clock watch"),
        ]

    async def _claim_loop(self, tg: asyncio.TaskGroup) -> None:
        while not self.draining:
            await self.authorized.wait()
            slots = self.runs.free_slots
            if slots > 0:
                await self._claim_once(slots, tg)
                continue
            if self.runs.turns_running and (self._steer_claim is None or self._steer_claim.done()):
                self._steer_claim = tg.create_task(self._claim_once(0, tg), name="boss steer claim")
            await self._slot_freed(self._steer_claim)

    async def _claim_once(self, slots: int, tg: asyncio.TaskGroup) -> None:
        try:
            tasks = await self.api.claim(slots, self.claim_wait_ms)
        except Unauthorized:
            self.mark_unauthorized()
            return
        except BossApiError as exc:
            # A 4xx the policy does not retry (a server bug, an API mismatch): do not spin.
            logger.error("claim refused: %s", exc)
            await asyncio.sleep(CLAIM_REFUSED_PAUSE_S)
            return
        runs = [run for raw in tasks if (run := self.runs.accept(raw, tg)) is not None]
        # The claimed tasks' start goes first. The next claim (about a millisecond of this
        # loop) goes out once their runners have begun, while codex makes their threads;
        # the heartbeat that tells the new state (the server already knows from the claim)
        # once their first progress has gone out, so the person sees the task run first.
        await until_set((run.started for run in runs), START_FIRST_S)
        if tasks:
            tg.create_task(self._state_changed(runs), name="boss state heartbeat")

    async def _state_changed(self, runs: list[Run]) -> None:
        await until_set((run.shown for run in runs), STATE_AFTER_S)
        self.heartbeat.now.set()  # the state (busy, running ids) changed

    async def _slot_freed(self, steer_claim: asyncio.Task[None] | None = None) -> None:
        """Until one of our runs ends, the shared budget frees a slot (the gateway's), or
        the steer-only claim answered."""
        self.runs.changed.clear()
        waits: list[Any] = [self.runs.changed.wait(), self.runs.slots.wait_free()]
        if steer_claim is not None and not steer_claim.done():
            waits.append(steer_claim)  # watched, never cancelled: its answer must be accepted
        await race(*waits)

    async def _repair_watch(self) -> None:
        while True:
            await asyncio.sleep(REPAIR_CHECK_S)
            if self.authorized.is_set():
                continue
            stamp = identity_stamp(self.state_dir)
            if stamp is None or stamp == self._stamp:
                continue
            identity = load_identity(self.state_dir)
            if identity is None:
                continue
            logger.info("paired again as %s; resuming", identity.device_id)
            self._stamp, self.identity = stamp, identity
            old, self.api = self.api, self._new_api(identity)
            self.runs.api = self.approvals.api = self.api
            await old.__aexit__(None, None, None)
            self.revoked.clear()
            self.authorized.set()

    async def on_resume(self, _drift_s: float) -> None:
        await self.api.reconnect()
        self.heartbeat.now.set()

    # ----------------------------------------------------------------- shutdown

    def stop_accepting(self) -> None:
        """The daemon stops: claim no more, and cancel at once the tasks that only wait on
        an approval (nobody has to answer for the agent to stop)."""
        self.stop_claiming()
        for task_id in self.approvals.cancel_waiting():
            logger.info("task %s only waits on an approval; cancelled for the stop", task_id)

    def stop_claiming(self) -> None:
        self.draining = True
        for claim in (self._claim, self._steer_claim):
            if claim is not None:
                claim.cancel()
        self.heartbeat.now.set()  # tell the server we are draining

    async def final_flush(self, timeout_s: float) -> None:
        """One bounded delivery attempt of the spool; what is left stays for the next start."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await self.flusher.flush(forever=False)

    async def close(self) -> None:
        """After the drain: one bounded delivery of the spool, then stop the loops."""
        await self.final_flush(FINAL_FLUSH_S)
        for loop in (*self._loops, self._steer_claim):
            if loop is not None:
                loop.cancel()
        await self.api.__aexit__(None, None, None)
