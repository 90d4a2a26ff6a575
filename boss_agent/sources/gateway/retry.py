"""How the gateway rides out Redis outages: one retry policy object, apart from the loops.

A classifier says which Redis errors are worth retrying (the connection dropped,
timed out, the server is loading or restarting); everything else is fatal for
that one operation. Backoff is jittered exponential with a cap, and it restarts
from the initial delay after every success because each call builds a fresh
``AsyncRetrying``. Tests inject a fast policy.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import redis.exceptions as rex
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_delay,
    stop_never,
    wait_exponential,
    wait_random,
)

logger = logging.getLogger(__name__)

_RETRYABLE = (rex.ConnectionError, rex.TimeoutError, rex.BusyLoadingError, ConnectionError,
              TimeoutError, OSError)


def is_retryable(exc: BaseException) -> bool:
    """True for a Redis error that a later attempt may not hit (outage, restart, failover)."""
    if isinstance(exc, rex.ResponseError):
        text = str(exc)
        # A replica promoted mid-outage, or a server still loading its data set.
        return text.startswith(("READONLY", "LOADING", "MASTERDOWN", "TRYAGAIN"))
    return isinstance(exc, _RETRYABLE)


@dataclass(frozen=True)
class RetryPolicy:
    initial_s: float = 0.2  # first retry soon: most blips are a reconnect
    max_s: float = 10.0  # never wait longer than this between attempts during an outage
    give_up_after_s: float | None = None  # None: retry forever (the daemon's loops)

    def retrying(self, what: str) -> AsyncRetrying:
        def log(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            logger.warning("redis %s failed (%s); retry %d in %.1fs", what,
                           type(exc).__name__, state.attempt_number,
                           state.next_action.sleep if state.next_action else 0.0)

        stop = stop_never if self.give_up_after_s is None else stop_after_delay(self.give_up_after_s)
        return AsyncRetrying(
            retry=retry_if_exception(is_retryable),
            wait=wait_exponential(multiplier=self.initial_s, max=self.max_s) + wait_random(0, self.initial_s),
            stop=stop,
            reraise=True,
            before_sleep=log,
        )

    async def call[**P, T](self, what: str, fn: Callable[P, Awaitable[T]],
                           *args: P.args, **kwargs: P.kwargs) -> T:
        """Await ``fn(*args, **kwargs)`` under this policy."""
        try:  # the fast path: no retry machinery is built unless the first attempt fails
            return await fn(*args, **kwargs)
        except Exception as exc:
            if not is_retryable(exc):
                raise
            logger.warning("redis %s failed (%s); retrying", what, type(exc).__name__)
        async for attempt in self.retrying(what):
            with attempt:
                return await fn(*args, **kwargs)
        raise AssertionError("unreachable: tenacity reraises")  # pragma: no cover


FAST_POLICY = RetryPolicy(initial_s=0.02, max_s=0.3)  # for tests and the benchmark
