"""The retry policy for calls to the Boss control plane, apart from the loops.

Device API "Retry rules": network errors, timeouts, 408, 429 and 5xx are retried with
jittered exponential backoff, honouring ``Retry-After`` up to a cap; every other 4xx
(401 included) is surfaced at once. Each call builds a fresh tenacity controller, so
the backoff resets after a success. Tests inject ``RetryPolicy.fast()``.
"""

from __future__ import annotations

import email.utils
import logging
import time
from dataclasses import dataclass

import tenacity

from boss_agent.errors import BossApiError, BossUnreachable

logger = logging.getLogger(__name__)

RETRYABLE_STATUSES = frozenset({408, 429})  # plus every 5xx


def is_retryable(exc: BaseException) -> bool:
    """The classifier: True for errors another attempt may cure."""
    if isinstance(exc, BossUnreachable):
        return True
    if isinstance(exc, BossApiError):
        return exc.status in RETRYABLE_STATUSES or 500 <= exc.status <= 599
    return False


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class _WaitRetryAfter(tenacity.wait.wait_base):
    """Wait what the server asked (capped), else the jittered exponential fallback."""

    def __init__(self, fallback: tenacity.wait.wait_base, cap_s: float) -> None:
        self.fallback = fallback
        self.cap_s = cap_s

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        asked = getattr(exc, "retry_after", None)
        if asked is not None:
            return min(float(asked), self.cap_s)
        return self.fallback(retry_state)


def _log_retry(retry_state: tenacity.RetryCallState) -> None:
    exc = retry_state.outcome.exception() if retry_state.outcome else None
    wait = retry_state.next_action.sleep if retry_state.next_action else 0.0
    logger.info("boss server call failed (%s), attempt %d, retrying in %.1fs",
                exc, retry_state.attempt_number, wait)


@dataclass(frozen=True)
class RetryPolicy:
    initial_s: float = 1.0  # first backoff; short enough that a blip costs little
    max_s: float = 60.0  # backoff ceiling: a long outage is polled once a minute
    jitter_s: float = 1.0  # spreads a fleet of devices reconnecting after an outage
    retry_after_cap_s: float = 120.0  # a server asking for longer is not obeyed blindly
    give_up_after_s: float | None = 120.0  # a bounded call surfaces the error after this

    @classmethod
    def fast(cls) -> RetryPolicy:
        """For tests: milliseconds instead of seconds, same shape."""
        return cls(initial_s=0.01, max_s=0.05, jitter_s=0.01, retry_after_cap_s=0.2,
                   give_up_after_s=5.0)

    def controller(self, *, forever: bool = False) -> tenacity.AsyncRetrying:
        """A fresh tenacity controller; ``forever`` retries until success or a fatal error."""
        stop: tenacity.stop.stop_base = tenacity.stop_never
        if not forever and self.give_up_after_s is not None:
            stop = tenacity.stop_after_delay(self.give_up_after_s)
        wait = (tenacity.wait_exponential(multiplier=self.initial_s, max=self.max_s)
                + tenacity.wait_random(0, self.jitter_s))
        return tenacity.AsyncRetrying(
            retry=tenacity.retry_if_exception(is_retryable),
            wait=_WaitRetryAfter(wait, self.retry_after_cap_s),
            stop=stop,
            reraise=True,
            before_sleep=_log_retry,
        )
