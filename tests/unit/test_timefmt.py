"""The one timestamp formatter: ISO-8601 UTC ending in Z, seconds or milliseconds."""

import re
from datetime import UTC, datetime

from boss_agent.timefmt import utc_iso, utc_now

MOMENT = datetime(2026, 11, 30, 15, 10, 46, 123456, tzinfo=UTC).timestamp()


def test_seconds_precision_drops_the_fraction_and_ends_in_z():
    assert utc_iso(MOMENT) == "2026-11-30T15:10:46Z"


def test_millisecond_precision_keeps_three_digits():
    assert utc_iso(MOMENT, ms=True) == "2026-11-30T15:10:46.123Z"


def test_a_whole_second_still_shows_its_milliseconds():
    assert utc_iso(float(int(MOMENT)), ms=True) == "2026-11-30T15:10:46.000Z"


def test_the_epoch_is_utc_whatever_the_local_zone(monkeypatch):
    monkeypatch.setenv("TZ", "America/Los_Angeles")
    assert utc_iso(0) == "1970-01-01T00:00:00Z"


def test_now_is_a_seconds_stamp():
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", utc_now())
