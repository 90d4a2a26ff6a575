"""The heartbeat loop (device API §2) and the suspend detector.

The heartbeat reads what it reports (capabilities from the discovery cache, running
tasks, system facts) from providers that never block, so a slow or failed discovery
never delays it. The server's answer sets the next interval and names tasks to
cancel. ``watch_clock`` notices a suspend/resume: the wall clock jumps ahead of the
monotonic clock (which stops while the machine sleeps), and the daemon reconnects
and heartbeats at once instead of waiting out a stale interval.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from boss_agent import metrics
from boss_agent.aio import periodic
from boss_agent.errors import BossAgentError, Unauthorized
from boss_agent.timefmt import utc_now

logger = logging.getLogger(__name__)

MIN_HEARTBEAT_INTERVAL_S = 1.0  # a server asking for less is not obeyed (it would be a DoS)
MAX_HEARTBEAT_INTERVAL_S = 300.0  # and more would make the device look dead
CLOCK_TICK_S = 5.0  # how often the wall/monotonic drift is sampled (half the jump below)
SUSPEND_JUMP_S = 10.0  # a drift larger than this is a suspend, not NTP slewing


def clamp_interval_s(interval_ms: Any, current_s: float) -> float:
    if not isinstance(interval_ms, int | float) or isinstance(interval_ms, bool) or interval_ms <= 0:
        return current_s
    return min(MAX_HEARTBEAT_INTERVAL_S, max(MIN_HEARTBEAT_INTERVAL_S, interval_ms / 1000))




class HeartbeatLoop:
    def __init__(self, send: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]],
                 body: Callable[[], dict[str, Any]], on_cancel: Callable[[str], Any],
                 on_unauthorized: Callable[[], None], interval_s: float) -> None:
        self.send = send
        self.body = body
        self.on_cancel = on_cancel
        self.on_unauthorized = on_unauthorized
        self.interval_s = interval_s
        self.now = asyncio.Event()  # set to heartbeat at once (resume, state change)
        self.last: dict[str, Any] | None = None  # {"at", "ok", "error"} for `status`
        self.count = 0

    async def run(self, authorized: asyncio.Event) -> None:
        async for _ in periodic(self.interval_s, wake=self.now, gate=authorized):
            await self.beat()

    async def beat(self) -> None:
        try:
            answer = await self.send(self.body())
        except Unauthorized:
            self.last = {"at": utc_now(), "ok": False, "error": "unauthorized"}
            self.on_unauthorized()
            return
        except BossAgentError as exc:
            logger.warning("heartbeat failed: %s", exc)
            self.last = {"at": utc_now(), "ok": False, "error": str(exc)[:200]}
            return
        self.count += 1
        self.last = {"at": utc_now(), "ok": True, "error": None}
        metrics.heartbeat_succeeded()
        self.interval_s = clamp_interval_s(answer.get("heartbeatIntervalMs"), self.interval_s)
        cancels = answer.get("cancelTaskIds")
        for task_id in cancels if isinstance(cancels, list) else ():
            if isinstance(task_id, str):
                self.on_cancel(task_id)


async def watch_clock(on_jump: Callable[[float], Awaitable[None]], *,
                      wall: Callable[[], float] = time.time,
                      mono: Callable[[], float] = time.monotonic,
                      tick_s: float = CLOCK_TICK_S, jump_s: float = SUSPEND_JUMP_S) -> None:
    """Call ``on_jump(seconds)`` whenever the wall clock runs ahead of the monotonic one."""
    offset = wall() - mono()
    while True:
        await asyncio.sleep(tick_s)
        drift = (wall() - mono()) - offset
        offset += drift
        if drift > jump_s:
            logger.info("the machine was suspended for about %.0fs; reconnecting", drift)
            await on_jump(drift)
