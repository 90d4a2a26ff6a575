"""The retry policy for calls to the Boss control plane, apart from the loops.

Device API "Retry rules": network errors, timeouts, 408, 429 and 5xx are retried with
jittered exponential backoff, honouring ``Retry-After`` up to a cap; every other 4xx
(401 included) is surfaced at once. ``BossApiRetry`` is that rule in the shared
``Backoff`` family, so the backoff resets after a success. Tests inject
``BossApiRetry.fast()``.
"""

from __future__ import annotations

import email.utils
import logging
import time
from dataclasses import dataclass
from typing import ClassVar

from tenacity import RetryCallState

from boss_agent.backoff import Backoff, failure, next_wait
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


@dataclass(frozen=True)
class BossApiRetry(Backoff):
    """The Boss API's backoff: ``is_retryable`` errors, ``Retry-After`` honoured up to a cap."""

    initial_s: float = 1.0  # first backoff; short enough that a blip costs little
    max_s: float = 60.0  # backoff ceiling: a long outage is polled once a minute
    jitter_s: float = 1.0  # spreads a fleet of devices reconnecting after an outage
    retry_after_cap_s: float | None = 120.0  # a server asking for longer is not obeyed blindly
    give_up_after_s: float | None = 120.0  # a bounded call surfaces the error after this
    label: ClassVar[str] = "boss server"

    def retryable(self, exc: BaseException) -> bool:
        return is_retryable(exc)

    def log_retry(self, what: str, state: RetryCallState) -> None:
        logger.info("boss server %s failed (%s), attempt %d, retrying in %.1fs",
                    what, failure(state), state.attempt_number, next_wait(state))
