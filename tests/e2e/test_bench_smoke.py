"""``python -m bench --quick`` as a smoke of every row, so the bench code cannot rot.

Every group runs with tiny sizes against its real peers (codex, redis-server, the
local control plane). Numbers are not judged here (no timed assertions; the figures
live in the bench table and ``results.json``): only that each row was measured, that
its cells are filled, and that the invariants hold that do not depend on speed.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.__main__ import COLUMNS, format_table
from bench.suite import GROUPS, QUICK, run_suite

pytestmark = [pytest.mark.codex, pytest.mark.redis, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def quick(codex_bin: str, monkeypatch_module: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch_module.setenv("BOSS_TEST_CODEX_BIN", codex_bin)
    return run_suite(QUICK)


@pytest.fixture(scope="module")
def monkeypatch_module() -> Any:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_every_row_of_the_quick_bench_is_measured_and_printed(quick: dict[str, Any]) -> None:
    rows = {row["row"]: row for row in quick["rows"]}
    assert set(rows) == {row for group in GROUPS for row, _ in group.rows}
    for row in rows.values():
        assert set(row) == {key for key, _ in COLUMNS}
        assert row["verdict"] != "error" and "error" not in row["boss_agent"], row
        assert row["boss_agent"] != "—" and row["peer"] != "—", row
    table = format_table(quick["rows"])
    assert "what it compares" in table and "json.loads" in table and "codex exec" in table


def test_the_invariants_that_do_not_depend_on_speed_hold(quick: dict[str, Any]) -> None:
    raw = quick["raw"]
    storm = raw["progress_storm"]
    assert storm["final_card_exact"] is True
    assert 1 <= storm["uploads_total"] < storm["deltas_fed"]  # coalesced, not one upload per delta
    assert storm["final_seq"] == storm["uploads_total"]  # every upload reached the server once
    long_turn = raw["long_turn"]
    assert long_turn["final_card_exact"] is True
    # The card shows a tail of the answer, not a log of it: its size does not grow with the turn.
    assert long_turn["last_card_bytes"] <= 1.1 * long_turn["first_card_bytes"]
    card = raw["card"]
    assert card["messages"] == QUICK.card_messages and card["ratio"] > 0
    assert raw["controlplane"]["tasks"] == QUICK.controlplane_tasks
    waits = raw["waits"]
    for path in ("boss", "gateway"):  # each path timed a real approval and its transport's floor
        assert waits[f"approval_{path}_ms"] > 0 and waits[f"approval_{path}_floor_ms"] > 0
    assert waits["first_words_ms"] > 0 and waits["bare_first_delta_ms"] > 0
    idle = raw["idle_fleet"]
    assert idle["workers"] == QUICK.idle_workers and idle["tasks"] == QUICK.cost_tasks
    assert idle["commands_per_task"] > 0  # a task's record writes, events and ack were counted
    concurrency = raw["concurrency"]
    assert 0 < concurrency["claim_to_turn_p50_ms"] <= concurrency["claim_to_turn_p99_ms"]
    phone = raw["phone"]
    assert phone["https_ms"] > 0 and phone["http_ms"] > 0 and phone["answer_bytes"] > 0
