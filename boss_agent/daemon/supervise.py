"""Each task source runs supervised: a failure inside one never stops the daemon.

``SourceSupervisor`` runs one ``TaskSource`` (built fresh by ``make`` for every
attempt) in the daemon's task group. An exception escaping the source's ``run`` — a
loop that raised, a Redis answer nobody expected, a bug — is logged with its
traceback, backed off (``RestartBackoff``, the same jittered exponential policy that
restarts the codex app-server) and a new source is started. The exception stops at
the supervisor, so the daemon's task group, the other source and the runs of the
other source go on. A source that stayed up for ``STABLE_AFTER_S`` starts the next
backoff from the beginning.

Only cancellation (the daemon stopping) ends ``run``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from tenacity import RetryCallState

from boss_agent.backoff import RestartBackoff, failure, next_wait
from boss_agent.sources.contract import TaskSource

logger = logging.getLogger(__name__)

# A source that failed sooner than this after its start counts as a failed start:
# the backoff grows, so a source that crashes at once is not restarted in a tight loop.
STABLE_AFTER_S = 30.0


class SourceEnded(Exception):
    """A source's ``run`` returned although only cancellation should end it."""


S = TypeVar("S", bound=TaskSource)


class SourceSupervisor(Generic[S]):
    def __init__(self, name: str, make: Callable[[], S],
                 on_start: Callable[[S], None] | None = None,
                 policy: RestartBackoff | None = None) -> None:
        self.name = name
        self.make = make
        self.on_start = on_start
        self.policy = policy or RestartBackoff()
        self.current: S | None = None
        self.restarts = 0

    async def run(self, ready: asyncio.Event) -> None:
        """Run the source until cancelled, restarting it after every failure."""
        while True:  # a fresh backoff after every run that stayed up
            async for attempt in self.policy.retrying(before_sleep=self._log_retry):
                with attempt:
                    await self._attempt(ready)

    async def _attempt(self, ready: asyncio.Event) -> None:
        started = time.monotonic()
        try:
            await self._serve_once(ready)
        except Exception:
            if time.monotonic() - started < STABLE_AFTER_S:
                raise  # to the policy: back off
            logger.exception("the %s source failed after running a while; restarting it",
                             self.name)

    async def _serve_once(self, ready: asyncio.Event) -> None:
        source = self.make()
        self.current = source
        if self.on_start is not None:
            self.on_start(source)
        try:
            await source.run(ready)
        except Exception:
            await self._close_failed(source)
            raise
        raise SourceEnded(f"the {self.name} source stopped on its own")

    async def _close_failed(self, source: S) -> None:
        self.restarts += 1
        try:
            await source.close()
        except Exception as exc:  # noqa: BLE001 - it already failed; its resources are best effort
            logger.warning("closing the failed %s source failed too (%s)", self.name,
                           type(exc).__name__)

    def _log_retry(self, state: RetryCallState) -> None:
        exc, delay = failure(state), next_wait(state)
        logger.error("the %s source failed (%s); restarting it in %.1f s", self.name,
                     type(exc).__name__, delay, exc_info=exc)
