"""Bounded waits for tests: one ``eventually`` for conditions, one ``within`` for awaitables.

No test sleeps for timing. A condition with an event that fires when it may have
changed is re-checked on each firing (``changed``); one with no event (a process
appearing, a key in Redis) is polled at ``POLL_S``. Either way the wait is bounded,
so a broken wake-up fails the test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

WAIT_S = 30.0  # a turn against the scripted model takes well under a second; CI is slow
POLL_S = 0.02  # for conditions with no event to await
T = TypeVar("T")


async def eventually(predicate: Callable[[], Any], timeout: float = WAIT_S, *,
                     changed: asyncio.Event | None = None, every: float = POLL_S) -> Any:
    """Until ``predicate()`` (sync or async) is truthy; return its value. TimeoutError past ``timeout``.

    With ``changed``, re-check each time that event is set (the caller's code sets it on
    every change); without, poll ``every`` seconds.
    """
    async with asyncio.timeout(timeout):
        while True:
            if changed is not None:
                changed.clear()  # cleared before the check: a change during it is not missed
            value = predicate()
            if inspect.isawaitable(value):
                value = await value
            if value:
                return value
            if changed is not None:
                await changed.wait()
            else:
                await asyncio.sleep(every)


async def within(awaitable: Awaitable[T], timeout: float = WAIT_S) -> T:
    """Await ``awaitable`` with a bound, so a broken wake-up fails instead of hanging."""
    async with asyncio.timeout(timeout):
        return await awaitable
