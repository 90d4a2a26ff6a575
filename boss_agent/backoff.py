"""One backoff family: jittered exponential waits with a cap, for every role that retries.

``Backoff`` holds the numbers (first wait, ceiling, jitter, and the optional limits: a
time bound, an attempt bound, a cap on a server's ``Retry-After``) and builds the tenacity
controller from them. A role subclasses it with its own defaults, its classifier
(``retryable``) and its log line: the Boss API client (``BossApiRetry``), the gateway's
Redis calls (``RedisRetry``), codex's ``-32001`` overload answers (``OverloadRetry``) and
the supervisors that restart a failed component (``RestartBackoff``, below).

Each ``retrying()``/``call`` builds a fresh controller, so the backoff starts again from
``initial_s`` after a success. ``fast()`` is the same role in milliseconds, for tests.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import ClassVar, ParamSpec, Self, TypeAlias, TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    stop_never,
    wait_exponential,
    wait_random,
)
from tenacity.stop import stop_base
from tenacity.wait import wait_base

from boss_agent.errors import ConfigError

logger = logging.getLogger(__name__)

BeforeSleep: TypeAlias = Callable[[RetryCallState], None]
P = ParamSpec("P")
T = TypeVar("T")

# fast(): the same shape in milliseconds, bounded so a test that never succeeds ends.
FAST_INITIAL_S = 0.01
FAST_MAX_S = 0.05
FAST_RETRY_AFTER_CAP_S = 0.2
FAST_GIVE_UP_S = 5.0


@dataclass(frozen=True)
class Backoff:
    """Wait ``initial_s * 2**(n-1)`` capped at ``max_s``, plus up to ``jitter_s`` at random."""

    initial_s: float = 1.0
    max_s: float = 60.0
    jitter_s: float = 1.0  # spreads many clients retrying after one outage apart
    give_up_after_s: float | None = None  # None: no time bound
    max_retries: int | None = None  # None: no attempt bound
    retry_after_cap_s: float | None = None  # None: a server's Retry-After is not read
    label: ClassVar[str] = "call"  # what the log lines call the role's operations

    @classmethod
    def fast(cls) -> Self:
        """For tests: the role's classifier and limits, waits in milliseconds."""
        slow = cls()
        return replace(
            slow, initial_s=FAST_INITIAL_S, max_s=FAST_MAX_S, jitter_s=FAST_INITIAL_S,
            retry_after_cap_s=None if slow.retry_after_cap_s is None else FAST_RETRY_AFTER_CAP_S,
            give_up_after_s=None if slow.give_up_after_s is None else FAST_GIVE_UP_S)

    # ------------------------------------------------------------- the role's hooks

    def retryable(self, exc: BaseException) -> bool:
        """The classifier: True for an error another attempt may cure. Roles override it."""
        return isinstance(exc, Exception)

    def log_retry(self, what: str, state: RetryCallState) -> None:
        logger.warning("%s %s failed (%s); retry %d in %.1fs", self.label, what,
                       _error_name(state), state.attempt_number, next_wait(state))

    # ------------------------------------------------------------------ the machinery

    def wait(self) -> wait_base:
        exponential = wait_exponential(multiplier=self.initial_s, max=self.max_s)
        jittered: wait_base = exponential + wait_random(0, self.jitter_s)
        if self.retry_after_cap_s is None:
            return jittered
        return _WaitRetryAfter(jittered, self.retry_after_cap_s)

    def stop(self, *, forever: bool = False) -> stop_base:
        stop: stop_base = stop_never
        if not forever and self.give_up_after_s is not None:
            stop = stop_after_delay(self.give_up_after_s)
        if not forever and self.max_retries is not None:
            stop = stop | stop_after_attempt(self.max_retries + 1)
        return stop

    def retrying(self, what: str = "call", *, forever: bool = False,
                 before_sleep: BeforeSleep | None = None) -> AsyncRetrying:
        """A fresh controller; ``forever`` lifts the time and attempt bounds."""
        return AsyncRetrying(
            retry=retry_if_exception(self.retryable),
            wait=self.wait(),
            stop=self.stop(forever=forever),
            reraise=True,
            before_sleep=before_sleep or (lambda state: self.log_retry(what, state)),
        )

    async def call(self, what: str, fn: Callable[P, Awaitable[T]],
                           *args: P.args, **kwargs: P.kwargs) -> T:
        """Await ``fn(*args, **kwargs)`` under this backoff.

        The first attempt runs without building the retry machinery, and a retryable
        failure of it is retried at once: most blips are a dropped connection that the
        next attempt reopens. From then on the waits grow.
        """
        try:
            return await fn(*args, **kwargs)
        except Exception as exc:
            if not self.retryable(exc):
                raise
            logger.warning("%s %s failed (%s); retrying", self.label, what, type(exc).__name__)
        async for attempt in self.retrying(what):
            with attempt:
                return await fn(*args, **kwargs)
        raise AssertionError("unreachable: tenacity reraises")  # pragma: no cover


@dataclass(frozen=True)
class RestartBackoff(Backoff):
    """Between failed (re)starts of a supervised component: every error but a config error, forever.

    A ``ConfigError`` is the owner's to fix: another start cannot cure it, so it ends the
    supervision (and the command, exit 2) instead of looping with a traceback each time.
    """

    initial_s: float = 0.2
    max_s: float = 30.0
    jitter_s: float = 0.5
    label: ClassVar[str] = "restart"

    def retryable(self, exc: BaseException) -> bool:
        return isinstance(exc, Exception) and not isinstance(exc, ConfigError)


def next_wait(state: RetryCallState) -> float:
    """The sleep tenacity chose before the next attempt (0 when none is known)."""
    return state.next_action.sleep if state.next_action else 0.0


def failure(state: RetryCallState) -> BaseException | None:
    """The error the last attempt raised, if any."""
    return state.outcome.exception() if state.outcome else None


def _error_name(state: RetryCallState) -> str:
    return type(failure(state)).__name__


class _WaitRetryAfter(wait_base):
    """Wait what the server asked (``exc.retry_after``, capped), else the fallback."""

    def __init__(self, fallback: wait_base, cap_s: float) -> None:
        self.fallback = fallback
        self.cap_s = cap_s

    def __call__(self, retry_state: RetryCallState) -> float:
        asked = getattr(failure(retry_state), "retry_after", None)
        if asked is not None:
            return min(float(asked), self.cap_s)
        return float(self.fallback(retry_state))
