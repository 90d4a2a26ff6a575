"""How the gateway rides out Redis outages: ``RedisRetry``, apart from the loops.

A classifier says which Redis errors are worth retrying (the connection dropped,
timed out, the server is loading or restarting); everything else is fatal for
that one operation. The waits are the shared ``Backoff`` family's (jittered
exponential with a cap, reset after every success). Tests inject ``FAST_POLICY``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import redis.exceptions as rex

from boss_agent.backoff import Backoff

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
class RedisRetry(Backoff):
    """The gateway's backoff for Redis calls: ``is_retryable`` errors, forever by default."""

    initial_s: float = 0.2  # first retry soon: most blips are a reconnect
    max_s: float = 10.0  # never wait longer than this between attempts during an outage
    jitter_s: float = 0.2
    give_up_after_s: float | None = None  # None: retry forever (the daemon's loops)
    label: ClassVar[str] = "redis"

    def retryable(self, exc: BaseException) -> bool:
        return is_retryable(exc)


FAST_POLICY = RedisRetry.fast()  # for tests and the benchmark
