"""Two asyncio shapes the daemon needs everywhere: ``race`` and ``periodic``.

``race`` waits for the first of several awaitables and cancels the rest (a slot or a
cancel, an approval or a cancel, the daemon or its readiness). ``periodic`` is the
"do it now, then every N seconds or sooner when woken" loop of the heartbeat, the
spool flusher and the systemd watchdog. Both used to be written by hand at each site.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Iterable
from typing import Any, TypeVar, overload

A = TypeVar("A")
B = TypeVar("B")


@overload
async def race(first: Awaitable[A], second: Awaitable[B], /) -> tuple[asyncio.Future[A], asyncio.Future[B]]: ...
@overload
async def race(first: Awaitable[Any], second: Awaitable[Any], third: Awaitable[Any], /,
               *more: Awaitable[Any]) -> tuple[asyncio.Future[Any], ...]: ...
async def race(*contenders: Awaitable[Any]) -> tuple[asyncio.Future[Any], ...]:
    """Run ``contenders`` until the first one finishes; cancel the others and wait for them.

    Returns the contenders as futures, in argument order, all of them finished: look at
    ``cancelled()`` / ``result()``. Two can finish in the same loop step, so a loser
    that completed before its cancel took effect keeps its result (a slot it was handed
    is then the caller's to give back). A Future or Task passed in is watched, never
    cancelled, and its outcome is left to the caller, who owns it. If a contender race
    made raised, ``race`` raises that exception (the first in argument order) once every
    other one has ended. When the caller is cancelled, the contenders it made are too.
    """
    owned = [not asyncio.isfuture(c) for c in contenders]
    futures = tuple(asyncio.ensure_future(c) for c in contenders)
    try:
        await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
    finally:
        losers = [f for f, mine in zip(futures, owned, strict=True) if mine and not f.done()]
        for future in losers:
            future.cancel()
        if losers:
            # Ordering: wait for the cancelled ones to end, so nothing outlives the race.
            await asyncio.wait(losers)
    for future, mine in zip(futures, owned, strict=True):
        error = future.exception() if mine and future.done() and not future.cancelled() else None
        if error is not None:
            raise error
    return futures


async def periodic(interval_s: float, *, wake: asyncio.Event | None = None, gate: asyncio.Event | None = None,
                   until: asyncio.Event | None = None) -> AsyncIterator[int]:
    """Yield a tick now, then every ``interval_s`` or as soon as ``wake`` is set.

    ``wake`` is cleared just before each tick, so a wake-up that arrives while the
    caller works on a tick is kept for the next wait, never lost. ``gate`` (when given)
    must be set before each tick (e.g. "the device is paired"). The loop ends as soon
    as ``until`` is set. Yields the tick count, from 0.
    """
    tick = 0
    while until is None or not until.is_set():
        if gate is not None:
            await gate.wait()
        if wake is not None:
            wake.clear()
        yield tick
        tick += 1
        await _sleep_or_event(interval_s, wake, until)


async def _sleep_or_event(interval_s: float, wake: asyncio.Event | None, until: asyncio.Event | None) -> None:
    """Up to ``interval_s``, less when ``wake`` or ``until`` is set."""
    events = [event for event in (wake, until) if event is not None]
    if not events:
        await asyncio.sleep(interval_s)
        return
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(interval_s):
            if len(events) == 1:
                await events[0].wait()
            else:
                await race(events[0].wait(), events[1].wait())


async def until_set(events: Iterable[asyncio.Event], timeout_s: float) -> None:
    """Until each of ``events`` is set, for at most ``timeout_s`` in all (the caller goes
    on either way: e.g. a source's own request that should wait for runs to start)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            for event in events:
                await event.wait()
