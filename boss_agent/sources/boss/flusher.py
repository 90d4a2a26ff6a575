"""Delivers the completion spool (device API §5): oldest first, at least once.

A spooled body leaves the spool only after a 2xx. Retryable failures are retried by
the policy without end (with backoff, so an outage costs one request per backoff
step); a 401 pauses delivery until the device is paired again.

A result is never dropped for its size: a ``413`` is answered at once with the body
trimmed (``COMPLETE_TRIMS``: a smaller card, then a shorter ``resultText`` cut with a
marker). A body the server refuses even then stays in the spool and is tried again
with the policy's backoff, and ``refused`` says why for ``boss-agent status``. Any
other 4xx means the server will never accept this body (the task is not ours any
more, the body is malformed), so it is dropped with a warning rather than retried
forever.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from boss_agent.aio import periodic
from boss_agent.errors import BossApiError, Unauthorized
from boss_agent.progress.bounds import MAX_RESULT_BYTES, cut_result_text, fit_wire
from boss_agent.sources.boss.api import BossApi
from boss_agent.sources.boss.progress import too_large
from boss_agent.sources.boss.spool import CompletionSpool

logger = logging.getLogger(__name__)

SPOOL_RESCAN_S = 60.0  # a safety net: a wake-up is normally what starts a flush
# (card budget, resultText bytes) to resend with after a 413, each smaller than the last:
# first the card alone (its lists emptied last), then the answer, cut with a marker.
COMPLETE_TRIMS = ((64 * 1024, MAX_RESULT_BYTES), (4 * 1024, MAX_RESULT_BYTES),
                  (4 * 1024, 256 * 1024), (4 * 1024, 64 * 1024))


def trimmed(body: dict[str, Any], card_budget: int, text_bytes: int) -> dict[str, Any]:
    """A ``complete`` body with its card within ``card_budget`` and its text within
    ``text_bytes`` (the spooled body itself is never changed)."""
    out = dict(body)
    if isinstance(out.get("executionProgress"), dict):
        out["executionProgress"] = fit_wire(out["executionProgress"], card_budget)
    if isinstance(out.get("resultText"), str):
        out["resultText"] = cut_result_text(out["resultText"], text_bytes)
    return out


class SpoolFlusher:
    def __init__(self, api: Callable[[], BossApi], spool: CompletionSpool,
                 on_unauthorized: Callable[[], None]) -> None:
        self._api = api
        self.spool = spool
        self.on_unauthorized = on_unauthorized
        self.delivered: list[str] = []  # task ids, in delivery order (status and tests)
        self.changed = asyncio.Event()  # set after every delivery (status and tests wait on it)
        self.refused: dict[str, str] = {}  # task id -> why the server refused it (413), for status
        self._retry: dict[str, tuple[int, float]] = {}  # task id -> (refusals, not before, monotonic)
        self._wake = asyncio.Event()

    def wake(self) -> None:
        self._wake.set()

    async def run(self, authorized: asyncio.Event) -> None:
        async for _ in periodic(SPOOL_RESCAN_S, wake=self._wake, gate=authorized):
            await self.flush()

    def status(self) -> str | None:
        """One line for ``boss-agent status`` while the server refuses spooled results."""
        if not self.refused:
            return None
        return (f"{len(self.refused)} result(s) refused by the server as too large (413) even "
                "trimmed; kept in the spool and retried with backoff")

    async def flush(self, *, forever: bool = True) -> bool:
        """Send everything spooled; True when the spool is empty afterwards."""
        for task_id, body in self.spool.pending():
            if self._retry.get(task_id, (0, 0.0))[1] > time.monotonic():
                continue  # refused a moment ago: its backoff wakes us
            try:
                await self._deliver(task_id, body, forever)
            except Unauthorized:
                logger.warning("the device token was revoked; %d result(s) stay spooled",
                               len(self.spool))
                self.on_unauthorized()
                return False
            except BossApiError as exc:
                if exc.status == 0 or exc.status >= 500 or exc.status in (408, 429):
                    return False  # bounded attempt gave up; the spool keeps it
                if too_large(exc):
                    self._refused_again(task_id)
                    continue
                logger.warning("the server refused the result of task %s (%s); dropped",
                               task_id, exc)
            else:
                logger.info("result of task %s delivered", task_id)
                self.delivered.append(task_id)
            self.spool.remove(task_id)
            self._retry.pop(task_id, None)
            self.refused.pop(task_id, None)
            self.changed.set()
        return len(self.spool) == 0

    async def _deliver(self, task_id: str, body: dict[str, Any], forever: bool) -> None:
        """``complete`` with ``body``; on a 413 again at once, trimmed, step by step."""
        api = self._api()
        try:
            await api.complete(task_id, body, forever=forever)
            return
        except BossApiError as exc:
            if not too_large(exc):
                raise
        for card_budget, text_bytes in COMPLETE_TRIMS:
            logger.info("the server refused the result of task %s as too large; resending it "
                        "trimmed (card %d KiB, answer %d KiB)", task_id, card_budget // 1024,
                        text_bytes // 1024)
            try:
                await api.complete(task_id, trimmed(body, card_budget, text_bytes), forever=forever)
                return
            except BossApiError as exc:
                if not too_large(exc) or (card_budget, text_bytes) == COMPLETE_TRIMS[-1]:
                    raise

    def _refused_again(self, task_id: str) -> None:
        """Keep it spooled; try again after the policy's backoff, doubling each time."""
        policy = self._api().policy
        refusals = self._retry.get(task_id, (0, 0.0))[0] + 1
        delay = min(policy.initial_s * 2 ** (refusals - 1), policy.max_s)
        self._retry[task_id] = (refusals, time.monotonic() + delay)
        self.refused[task_id] = "too large (413)"
        if refusals == 1:
            logger.warning("the server refuses the result of task %s as too large even trimmed; "
                           "it stays spooled and is retried with backoff", task_id)
        asyncio.get_running_loop().call_later(delay, self.wake)
        self.changed.set()
