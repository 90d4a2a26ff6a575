"""The runner's side of the progress card: reduce every message, tell the sink.

One ``CardFeed`` per task. It owns the current ``Card``, feeds it app-server
messages, ``codex exec`` events and the runner's own ``boss/*`` lifecycle
events, and hands the sink the new (immutable) ``Card`` whenever it changed. The
sink serializes only what it actually sends: a card per answer delta costs a
reference, not a ``to_dict`` (the sources coalesce uploads to a few a second).
"""

from __future__ import annotations

import logging
from typing import Any

from boss_agent.progress.card import Card, new_card
from boss_agent.progress.reducer import reduce, reduce_exec_event
from boss_agent.tasks import TaskSink
from boss_agent.timefmt import utc_iso

logger = logging.getLogger(__name__)


class CardFeed:
    def __init__(self, sink: TaskSink, *, backend: str, workdir: str | None) -> None:
        self.sink = sink
        self.card: Card = new_card(backend=backend, workdir=workdir, now=utc_iso(ms=True))

    async def feed(self, message: dict[str, Any]) -> None:
        """Reduce one app-server wire message (notification or server request)."""
        await self._set(reduce(self.card, message))

    async def feed_exec(self, event: dict[str, Any]) -> None:
        await self._set(reduce_exec_event(self.card, event))

    async def event(self, event: str, /, **params: Any) -> None:
        """A runner lifecycle event, ``boss/<event>`` (positional-only: params may hold "name")."""
        await self.feed({"method": f"boss/{event}", "params": params})

    async def status(self, status: str) -> None:
        await self.event("status", status=status, at=utc_iso(ms=True))

    async def _set(self, card: Card) -> None:
        # Identity only: the reducer returns the same card when nothing changed, and a
        # field-by-field ``==`` per delta costs more than the sink's lazy handling.
        if card is self.card:
            return
        self.card = card
        try:
            await self.sink.progress(card)
        except Exception as exc:  # noqa: BLE001 - a failing upload must not fail the task; the source retries
            logger.warning("progress upload failed: %s", exc.__class__.__name__)

    def to_dict(self) -> dict[str, Any]:
        return self.card.to_dict()
