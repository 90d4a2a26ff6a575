"""The supported codex range: one place states it, every start checks it.

A codex below the range is refused by ``run`` and ``up`` in one line naming the range
(exit 2) before anything starts; one above it runs. The stand-in ``codex`` only prints
a version: that is all the check reads before it decides (a real old release is what
the range's lower end is tested on in CI, scripts/test-oldest-codex.sh).
"""

from __future__ import annotations

import logging
import re

import pytest

from boss_agent.codexversion import (
    NEWEST_TESTED,
    OLDEST_SUPPORTED,
    Support,
    dotted,
    parse,
    range_text,
    require_supported,
    support,
)
from boss_agent.errors import CodexTooOld
from tests.conftest import REPO

BELOW = dotted((OLDEST_SUPPORTED[0], OLDEST_SUPPORTED[1] - 1, 0))
ABOVE = dotted((NEWEST_TESTED[0], NEWEST_TESTED[1] + 1, 0))


def test_the_range_is_the_one_scripts_install_and_ci_runs() -> None:
    setup = (REPO / "scripts" / "setup-common.sh").read_text()
    pinned = re.search(r'^CODEX_NPM_VERSION="([^"]+)"', setup, re.M)
    oldest = re.search(r'^CODEX_OLDEST_NPM_VERSION="([^"]+)"', setup, re.M)
    assert pinned and parse(pinned.group(1)) == NEWEST_TESTED
    assert oldest and parse(oldest.group(1)) == OLDEST_SUPPORTED


@pytest.mark.parametrize(("text", "verdict"), [
    (BELOW, Support.BELOW), (dotted(OLDEST_SUPPORTED), Support.INSIDE),
    (f"codex-cli {dotted(NEWEST_TESTED)}", Support.INSIDE), (ABOVE, Support.ABOVE),
    (f"{ABOVE}-alpha.1", Support.ABOVE), ("unknown", Support.UNKNOWN), (None, Support.UNKNOWN),
])
def test_a_version_is_below_inside_or_above_the_range(text: str | None, verdict: Support) -> None:
    assert support(text) is verdict


def test_a_newer_codex_runs_and_says_so_once(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="boss_agent.codexversion"):
        require_supported(ABOVE)
        require_supported(ABOVE)
    assert [r.getMessage() for r in caplog.records if ABOVE in r.getMessage()] == [
        f"codex {ABOVE} is newer than boss-agent was tested with (codex {range_text()}); running it"]


def test_an_older_codex_is_refused_with_the_range_and_the_upgrade() -> None:
    with pytest.raises(CodexTooOld, match=re.escape(range_text())):
        require_supported(BELOW)
