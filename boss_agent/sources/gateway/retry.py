"""How the gateway rides out Redis outages: ``RedisRetry``, apart from the loops.

A classifier says which Redis errors are worth retrying: ``RedisUnavailable`` (the
connection dropped, timed out, the server is loading, read-only or failing over), as
``redis_errors.map_error`` classes them; everything else is fatal for that one
operation. The waits are the shared ``Backoff`` family's (jittered
exponential with a cap, reset after every success). Tests inject ``FAST_POLICY``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from boss_agent.backoff import Backoff
from boss_agent.errors import RedisUnavailable
from boss_agent.sources.gateway.redis_errors import map_error


def is_retryable(exc: BaseException) -> bool:
    """True for a Redis error that a later attempt may not hit (outage, restart, failover)."""
    return isinstance(map_error(exc), RedisUnavailable)  # raw redis-py errors are mapped too


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
