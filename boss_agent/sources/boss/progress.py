"""Progress uploads for one task (device API §4): coalesced, ordered, last state kept.

The runner may report a new card for every streamed token; the uploader keeps only
the latest card (a reference to the immutable ``Card``: it is serialized only when
an upload actually goes out, a few times a second, not per token) and sends at most
``MAX_UPLOADS_PER_S`` requests per task, with ``seq`` growing by one per upload. The
first goes out one window after the task starts (the claim already told the server
it runs), except the first card that shows words of the answer: that one goes out at
once (what the person waits for) and takes the place of its window's upload, so the
rate stays bounded. ``close`` sends the final card (if it was not the last one sent)
before ``run`` returns. A ``404``/``409`` answer (the task was taken away) or
``cancelRequested: true`` sets the task's cancel event. Once the runner names the
live thread and turn (``set_refs``), every upload carries them too, and
learning them is itself a change worth an upload: the app steers with them.

A ``413`` (the server refuses the body's size) is answered at once with the same card
trimmed to a smaller budget (``TRIM_BUDGETS``, device API §5), and the task keeps the
smallest budget its server took for the rest of its uploads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from boss_agent.errors import BossAgentError, BossApiError, TaskGone, Unauthorized
from boss_agent.progress.bounds import fit_wire
from boss_agent.progress.card import Card, answer_preview
from boss_agent.sources.boss.api import BossApi

logger = logging.getLogger(__name__)

MAX_UPLOADS_PER_S = 4.0  # a phone redraws a card a few times a second at most
MIN_UPLOAD_INTERVAL_S = 1.0 / MAX_UPLOADS_PER_S

CardState = Card | dict[str, Any]  # the runner's live card, or the result's final wire dict
TOO_LARGE = 413
# Card budgets to resend with after a 413, each a quarter of the one before: a server
# that refuses 256 KiB takes a 64 KiB card, and 4 KiB is a card with its lists emptied.
TRIM_BUDGETS = (64 * 1024, 16 * 1024, 4 * 1024)


def too_large(exc: BaseException) -> bool:
    return isinstance(exc, BossApiError) and exc.status == TOO_LARGE


def wire_card(card: CardState) -> dict[str, Any]:
    """The ``executionProgress`` object to send: serialized here, at upload time."""
    return card.to_dict() if isinstance(card, Card) else card


def shows_words(card: CardState) -> bool:
    """Whether the card, as sent, would show words of the answer (its ``answerPreview``)."""
    return bool(answer_preview(card) if isinstance(card, Card) else card.get("answerPreview"))


class ProgressUploader:
    def __init__(self, api: BossApi, task_id: str, cancel: asyncio.Event, *,
                 min_interval_s: float = MIN_UPLOAD_INTERVAL_S,
                 on_first_upload: Callable[[], None] | None = None) -> None:
        self.api = api
        self.task_id = task_id
        self.cancel = cancel
        self.min_interval_s = min_interval_s
        self.on_first_upload = on_first_upload  # called once its first upload has been answered
        self.seq = 0
        self._latest: CardState | None = None
        self._sent: CardState | None = None
        self._refs: dict[str, str] = {}
        self._sent_refs: dict[str, str] = {}
        self._dirty = asyncio.Event()
        self._closed = asyncio.Event()
        self._urgent = asyncio.Event()  # ends the coalescing window: closed, or the first words
        self._words_seen = False
        self._gone = False
        self._budget: int | None = None  # after a 413: the card budget this server takes

    def update(self, card: CardState) -> None:
        """Remember the newest card; cheap, never blocks (the preview is looked at only
        until the first words appear: a few deltas)."""
        self._latest = card
        if not self._words_seen and shows_words(card):
            self._words_seen = True
            self._urgent.set()
        self._dirty.set()

    def set_refs(self, thread_ref: str, turn_id: str) -> None:
        """The live ``codexThreadRef`` and ``turnId``; sent with this and every later upload."""
        self._refs = {"codexThreadRef": thread_ref, "turnId": turn_id}
        self._dirty.set()

    def close(self, final_card: dict[str, Any] | None = None) -> None:
        """No more updates; ``run`` uploads ``final_card`` (or the latest) and returns."""
        if final_card:
            self._latest = final_card
        self._closed.set()
        self._urgent.set()
        self._dirty.set()

    async def run(self) -> None:
        # The first window starts now, not at the first upload: the claim already made
        # the task ``running`` on the server, and an upload sent at once would share
        # the daemon's CPU with the runner's thread/start and turn/start. ``close``
        # still ends the window at once, so a short task sends just its final card; so do
        # the answer's first words, once.
        last_upload = time.monotonic()
        while not self._gone:
            await self._dirty.wait()
            window_end = last_upload + self.min_interval_s
            wait = window_end - time.monotonic()
            if wait > 0 and not self._urgent.is_set():
                # Coalescing window: updates arriving now replace each other. Closing
                # (and the first words) end the window early: never held back.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._urgent.wait(), wait)
            now = time.monotonic()
            early = now < window_end and not self._closed.is_set()  # the first words cut it short
            if not self._closed.is_set():
                self._urgent.clear()  # the first words end one window only
            self._dirty.clear()
            card, refs = self._latest, self._refs
            if card is not None and (card is not self._sent or refs != self._sent_refs):
                # An early upload takes the place of the one its window would have ended
                # with: the next window ends an interval after that, so a storm still
                # sees no more than MAX_UPLOADS_PER_S.
                last_upload = window_end if early else now
                await self._upload(card, refs)
                if self.seq == 1 and self.on_first_upload is not None:
                    self.on_first_upload()
            if self._closed.is_set() and not self._dirty.is_set():
                return

    async def _send(self, card: CardState, refs: dict[str, str]) -> dict[str, Any]:
        """One upload; on a 413 the same card again, trimmed to the next budget."""
        wire = wire_card(card)
        smaller = [b for b in TRIM_BUDGETS if self._budget is None or b < self._budget]
        while True:
            body = wire if self._budget is None else fit_wire(wire, self._budget)
            try:
                return await self.api.progress(self.task_id, self.seq, body, refs)
            except BossApiError as exc:
                if not too_large(exc) or not smaller:
                    raise
                self._budget = smaller.pop(0)
                logger.info("the server refused a progress card of task %s as too large; "
                            "resending it trimmed to %d KiB", self.task_id, self._budget // 1024)

    async def _upload(self, card: CardState, refs: dict[str, str]) -> None:
        self.seq += 1
        try:
            answer = await self._send(card, refs)
        except TaskGone:
            logger.warning("task %s was taken away by the server; stopping it", self.task_id)
            self._gone = True
            self.cancel.set()
            return
        except Unauthorized:
            self._gone = True  # the heartbeat and claim loops handle the revoked token
            return
        except BossAgentError as exc:
            logger.info("progress upload for task %s failed: %s", self.task_id, exc)
            return  # the next upload carries the newer state anyway
        self._sent, self._sent_refs = card, refs
        if answer.get("cancelRequested") is True:
            logger.info("the server asked to cancel task %s", self.task_id)
            self.cancel.set()
