"""The bench aggregator's plumbing, in-process and tiny: rows 4 (card) and 5 (progress
storm against the real local control plane) run, fill every column and print as a table.

Numbers are not judged here (no timed assertions); only that each row was measured
and that the storm's invariants hold: uploads were coalesced and the final card the
server keeps is exactly the last card fed.
"""

from __future__ import annotations

from bench.__main__ import COLUMNS, format_table
from bench.suite import Sizes, run_suite

TINY = Sizes(card_messages=2000, card_rounds=1, serialize_samples=50, storm_s=0.6)


def test_the_card_and_progress_storm_rows_are_measured_and_printed() -> None:
    results = run_suite(TINY, only={"card", "progress_storm"})

    rows = {row["row"]: row for row in results["rows"]}
    assert list(rows) == ["4", "5"]
    for row in rows.values():
        assert set(row) == {key for key, _ in COLUMNS}
        assert row["verdict"] in ("ok", "over goal"), row
        assert "error" not in row["boss_agent"]
    card, storm = results["raw"]["card"], results["raw"]["progress_storm"]
    assert card["messages"] == TINY.card_messages
    assert card["ratio"] > 0 and card["json_loads_msgs_per_s"] > 0 and card["reduce_msgs_per_s"] > 0
    assert storm["final_card_exact"] is True
    assert 1 <= storm["uploads_total"] < storm["deltas_fed"]  # coalesced, not one upload per delta
    assert storm["final_seq"] == storm["uploads_total"]  # every upload reached the server once
    table = format_table(results["rows"])
    assert "what it compares" in table and "json.loads" in table and "storm" in table
