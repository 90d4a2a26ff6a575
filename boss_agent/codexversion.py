"""The codex releases boss-agent supports, and the check every start makes.

``OLDEST_SUPPORTED`` … ``NEWEST_TESTED`` is the range the real-codex tests run on in CI
(the oldest one and the pinned one, ``scripts/setup-common.sh``). A codex below it is
refused at start (``CodexTooOld``: ``run`` and ``up`` exit 2 with one line naming the
range): it is missing what a promise of the daemon rests on (docs/codex-versions.md).
A newer codex runs, and the daemon says once that it is newer than tested.

The version comes from ``codex --version`` before the app-server starts and, for an
app-server we did not start (``ws://``/``unix://``), from ``initialize``'s ``userAgent``.
"""

from __future__ import annotations

import logging
import re
from enum import StrEnum

from boss_agent.codexbin import INSTALL_HINT, PINNED_CODEX_VERSION
from boss_agent.errors import CodexTooOld

logger = logging.getLogger(__name__)

Version = tuple[int, int, int]

_NUMBERS = re.compile(r"(\d+)\.(\d+)\.(\d+)")
_said_newer: set[str] = set()  # versions already logged as newer than tested (once per process)


class Support(StrEnum):
    BELOW = "below"
    INSIDE = "inside"
    ABOVE = "above"
    UNKNOWN = "unknown"


def parse(text: str | None) -> Version | None:
    """``0.171.0`` (or ``codex-cli 0.171.0``, ``0.172.0-alpha.1``) as numbers; None if absent."""
    match = _NUMBERS.search(text or "")
    if match is None:
        return None
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def _release(text: str) -> Version:
    found = parse(text)
    if found is None:
        raise ValueError(f"not a codex release: {text!r}")
    return found


OLDEST_SUPPORTED: Version = (0, 150, 0)  # CI's oldest run (scripts/setup-common.sh CODEX_OLDEST_NPM_VERSION)
NEWEST_TESTED: Version = _release(PINNED_CODEX_VERSION)  # the pinned release (CODEX_NPM_VERSION)


def dotted(version: Version) -> str:
    return ".".join(str(part) for part in version)


def range_text() -> str:
    return f"{dotted(OLDEST_SUPPORTED)} to {dotted(NEWEST_TESTED)}"


def support(text: str | None) -> Support:
    version = parse(text)
    if version is None:
        return Support.UNKNOWN
    if version < OLDEST_SUPPORTED:
        return Support.BELOW
    return Support.ABOVE if version > NEWEST_TESTED else Support.INSIDE


def at_least(text: str | None, minimum: Version) -> bool:
    """Is this version ``minimum`` or newer? An unknown version is not."""
    version = parse(text)
    return version is not None and version >= minimum


def require_supported(text: str | None) -> None:
    """Refuse a codex below the range; say once that one above it is newer than tested."""
    verdict = support(text)
    if verdict is Support.BELOW:
        raise CodexTooOld(f"codex {text} is older than boss-agent supports (codex {range_text()}); "
                          f"upgrade it: {INSTALL_HINT}")
    if verdict is Support.ABOVE and text not in _said_newer:
        _said_newer.add(str(text))
        logger.warning("codex %s is newer than boss-agent was tested with (codex %s); running it",
                       text, range_text())
