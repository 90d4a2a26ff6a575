"""Taking over the entries a dead worker left pending: a bounded page walk per round.

A worker that dies leaves its read-but-unacked entries pending under its consumer
name. Each round looks at up to ``RECLAIM_PAGES`` pages of pending entries idle for
longer than the lease allows, resuming where the last round stopped and wrapping at
the end: bounded work per round, yet every entry is seen, however many long-running
tasks of live workers come before it. An entry whose owner has no lease is claimed
(XCLAIM, whose min-idle check lets two reclaimers race safely) and dispatched like a
fresh read; the dispatcher fails a task that had
already started with ``agent_restarted`` instead of running it twice.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, cast

from redis.typing import StreamIdT

from boss_agent.errors import MissingGroup
from boss_agent.sources.gateway import keys
from boss_agent.sources.gateway.execution import Entry, Shared

logger = logging.getLogger(__name__)

PAGE = 100  # pending entries per XPENDING page
RECLAIM_PAGES = 10  # pages a round looks at per stream; the cursor resumes next round

Dispatch = Callable[[Entry, Any], Awaitable[None]]  # (entry, fields): the gateway handles it like a fresh read


class Reclaimer:
    def __init__(self, shared: Shared, idle_ms: int, dispatch: Dispatch) -> None:
        self.shared = shared
        self.idle_ms = idle_ms
        self.dispatch = dispatch
        self.cursor: dict[str, str] = {}  # stream -> where the next page starts

    async def round(self, stream: str) -> None:
        try:
            await self._pages(stream)
        except MissingGroup:
            # Redis restarted without its data: nothing is pending, and the readers
            # recreate the group on their next read.
            self.cursor.pop(stream, None)

    async def _pages(self, stream: str) -> None:
        alive: dict[str, bool] = {}
        redis = self.shared.redis
        for _ in range(RECLAIM_PAGES):
            start = self.cursor.get(stream, "-")
            pending = cast(list[keys.PendingEntry], await redis.xpending_range(
                stream, self.shared.group, min=start, max="+", count=PAGE, idle=self.idle_ms))
            if len(pending) < PAGE:
                self.cursor[stream] = "-"  # the end: the next round starts over
            else:  # exclusive start: the next page begins after the last one seen
                self.cursor[stream] = "(" + pending[-1]["message_id"].decode()
            await self._claim_dead(stream, pending, alive)
            if len(pending) < PAGE:
                return

    async def _claim_dead(self, stream: str, pending: list[keys.PendingEntry],
                          alive: dict[str, bool]) -> None:
        redis, me = self.shared.redis, self.shared.worker_id
        for owner in {p["consumer"].decode() for p in pending} - {me} - set(alive):
            alive[owner] = bool(await redis.exists(keys.worker_lease(owner)))
        ids: list[StreamIdT] = [p["message_id"] for p in pending
                                if p["consumer"].decode() != me and not alive[p["consumer"].decode()]]
        if not ids:
            return
        claimed = cast(keys.ClaimReply, await redis.xclaim(stream, self.shared.group, me, self.idle_ms, ids))
        for eid, fields in claimed:
            self.shared.stats["reclaimed"] += 1
            logger.warning("reclaimed a pending entry of a worker that is gone")
            fields_: Any = fields or {}
            await self.dispatch(Entry(stream, eid.decode()), fields_)
