"""The device's one task-slot budget, shared by every task source.

``config.max_concurrent_tasks`` bounds the tasks the device *runs*, whichever source
they came from. The Boss source and the Redis gateway both take a slot from one
``Slots`` before they call the runner and give it back when the run ends (or when a
gateway task suspends on an approval), so the two together never run more than the
budget.

Waiters are served first come, first served: ``release`` hands the slot straight to
the oldest waiter, and ``try_acquire`` and ``free`` count waiters as taken. Without
that, a source that gives a slot back and takes it again in the same step (a poll
loop) would starve the other source's waiting task forever.

The API is a superset of what the gateway used from ``asyncio.Semaphore``
(``acquire``, ``release``, ``locked``), plus ``try_acquire``, ``free`` and
``wait_free`` for sources that only ask for work when a slot is free.
"""

from __future__ import annotations

import asyncio
import collections


class Slots:
    """A fair counter of ``total`` task slots for one event loop."""

    def __init__(self, total: int) -> None:
        if total < 1:
            raise ValueError("a slot budget needs at least one slot")
        self.total = total
        self._used = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._freed = asyncio.Event()  # set whenever ``free`` may have grown

    def __repr__(self) -> str:
        return f"Slots(total={self.total}, used={self._used}, waiting={self._waiting()})"

    @property
    def used(self) -> int:
        return self._used

    @property
    def waiting(self) -> int:
        """Tasks queued for a slot."""
        return self._waiting()

    @property
    def free(self) -> int:
        """Slots a new task could take now (a queued waiter counts as taken)."""
        return max(0, self.total - self._used - self._waiting())

    def locked(self) -> bool:
        return self.free == 0

    def try_acquire(self) -> bool:
        if self.free == 0:
            return False
        self._used += 1
        return True

    async def acquire(self) -> None:
        """Take a slot, waiting in line behind earlier waiters when none is free."""
        if self.try_acquire():
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed a slot, then cancelled before using it: pass it on
            raise
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
                self._freed.set()  # a cancelled waiter no longer counts as taken

    def release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot passes on; ``used`` stays the same
                return
        if self._used <= 0:
            raise RuntimeError("Slots.release called more often than acquire")
        self._used -= 1
        self._freed.set()

    async def wait_free(self) -> None:
        """Return once at least one slot is free (without taking it)."""
        while self.free == 0:
            self._freed.clear()
            await self._freed.wait()

    def _waiting(self) -> int:
        return sum(1 for w in self._waiters if not w.done())
