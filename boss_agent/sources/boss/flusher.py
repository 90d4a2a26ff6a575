"""Delivers the completion spool (device API §5): oldest first, at least once.

A spooled body leaves the spool only after a 2xx. Retryable failures are retried by
the policy without end (with backoff, so an outage costs one request per backoff
step); a 401 pauses delivery until the device is paired again; any other 4xx means
the server will never accept this body, so it is dropped with a warning rather than
retried forever.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from boss_agent.aio import periodic
from boss_agent.errors import BossApiError, Unauthorized
from boss_agent.sources.boss.api import BossApi
from boss_agent.sources.boss.spool import CompletionSpool

logger = logging.getLogger(__name__)

SPOOL_RESCAN_S = 60.0  # a safety net: a wake-up is normally what starts a flush


class SpoolFlusher:
    def __init__(self, api: Callable[[], BossApi], spool: CompletionSpool,
                 on_unauthorized: Callable[[], None]) -> None:
        self._api = api
        self.spool = spool
        self.on_unauthorized = on_unauthorized
        self.delivered: list[str] = []  # task ids, in delivery order (status and tests)
        self.changed = asyncio.Event()  # set after every delivery (status and tests wait on it)
        self._wake = asyncio.Event()

    def wake(self) -> None:
        self._wake.set()

    async def run(self, authorized: asyncio.Event) -> None:
        async for _ in periodic(SPOOL_RESCAN_S, wake=self._wake, gate=authorized):
            await self.flush()

    async def flush(self, *, forever: bool = True) -> bool:
        """Send everything spooled; True when the spool is empty afterwards."""
        for task_id, body in self.spool.pending():
            try:
                await self._api().complete(task_id, body, forever=forever)
            except Unauthorized:
                logger.warning("the device token was revoked; %d result(s) stay spooled",
                               len(self.spool))
                self.on_unauthorized()
                return False
            except BossApiError as exc:
                if exc.status == 0 or exc.status >= 500 or exc.status in (408, 429):
                    return False  # bounded attempt gave up; the spool keeps it
                logger.warning("the server refused the result of task %s (%s); dropped",
                               task_id, exc)
            else:
                logger.info("result of task %s delivered", task_id)
                self.delivered.append(task_id)
            self.spool.remove(task_id)
            self.changed.set()
        return len(self.spool) == 0
