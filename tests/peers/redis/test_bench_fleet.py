"""The fleet bench rows (9a–9c) run end to end on a real redis-server with tiny sizes.

Numbers are not judged (no timing assertions): only that each fleet size was
measured, that every task of the burst completed, and that the table prints.
"""

from __future__ import annotations

import pytest

from bench.__main__ import format_table
from bench.suite import Sizes, run_suite

pytestmark = pytest.mark.redis

TINY = Sizes(fleet_tasks=20, fleet_samples=3, xadd_requests=500)


def test_the_fleet_rows_measure_one_ten_and_fifty_workers_beside_redis_benchmark() -> None:
    results = run_suite(TINY, only={"fleet"})

    rows = {row["row"]: row for row in results["rows"]}
    assert list(rows) == ["11a", "11b", "11c"], results["raw"]
    fleets = results["raw"]["fleet"]["fleets"]
    assert [f["workers"] for f in fleets] == [1, 10, 50]
    for fleet, row in zip(fleets, rows.values(), strict=True):
        assert fleet["tasks_per_s"] > 0 and 0 < fleet["dispatch_p50_ms"] <= fleet["dispatch_p99_ms"]
        assert 1 <= fleet["workers_that_ran_tasks"] <= fleet["workers"]
        assert fleet["redis_benchmark_xadd"]["rps"] > 0
        assert "tasks/s" in row["boss_agent"] and "XADD/s" in row["peer"]
    assert "fleet of 50 workers" in format_table(results["rows"])
