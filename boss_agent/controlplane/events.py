"""Wake-ups for long polls and the live event stream of the web page.

``Signal`` is a level-free "something changed" notice for long polls: a waiter
takes ``current()`` *before* it looks at the database, so a change that lands
between its look and its wait still wakes it (the event it holds is the one that
gets set). Nobody ever polls the database on a timer.

``Broadcaster`` fans events out to the page's SSE streams. Each subscriber has a
bounded queue; one that falls behind is dropped (its stream ends, and the browser's
EventSource reconnects and starts again from a fresh snapshot) so a stuck tab can
never grow the server's memory.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

logger = logging.getLogger(__name__)

SUBSCRIBER_QUEUE_MAX = 500  # events a slow page may lag behind before it is dropped


class Signal:
    def __init__(self) -> None:
        self._event = asyncio.Event()

    def current(self) -> asyncio.Event:
        return self._event

    def fire(self) -> None:
        self._event.set()
        self._event = asyncio.Event()


class Subscription:
    def __init__(self, holder: str | None = None) -> None:
        self.holder = holder  # the phone whose stream this is, so revoking it ends the stream
        self.queue: asyncio.Queue[tuple[str, Any] | None] = asyncio.Queue(SUBSCRIBER_QUEUE_MAX)

    def offer(self, item: tuple[str, Any] | None) -> bool:
        try:
            self.queue.put_nowait(item)
        except asyncio.QueueFull:
            return False
        return True


class Broadcaster:
    def __init__(self) -> None:
        self._subscribers: set[Subscription] = set()
        self.subscribed = Signal()  # fired on every new subscriber (a test can wait for a stream)

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)

    @asynccontextmanager
    async def subscribe(self, holder: str | None = None) -> AsyncIterator[Subscription]:
        sub = Subscription(holder)
        self._subscribers.add(sub)
        self.subscribed.fire()
        try:
            yield sub
        finally:
            self._subscribers.discard(sub)

    def publish(self, kind: str, payload: Any, *, owner_only: bool = False) -> None:
        """To every stream; ``owner_only``: not to phones' streams (the phone list is the owner's)."""
        for sub in list(self._subscribers):
            if owner_only and sub.holder is not None:
                continue
            if not sub.offer((kind, payload)):
                logger.warning("dropping a live-event subscriber that fell %d events behind", SUBSCRIBER_QUEUE_MAX)
                self._subscribers.discard(sub)
                self._end(sub)

    def end_holder(self, holder: str) -> None:
        """End the streams of ``holder`` (a revoked phone) now."""
        for sub in [s for s in self._subscribers if s.holder == holder]:
            self._subscribers.discard(sub)
            self._end(sub)

    def close(self) -> None:
        """End every stream (server shutdown)."""
        for sub in list(self._subscribers):
            self._end(sub)
        self._subscribers.clear()

    @staticmethod
    def _end(sub: Subscription) -> None:
        # A full queue cannot take the end marker; make room, the stream is ending anyway.
        while not sub.offer(None):
            sub.queue.get_nowait()
