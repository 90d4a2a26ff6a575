"""The side-by-side suite: every benchmark as rows of one table (``python -m bench``).

Each ``Group`` runs one measurement (the modules next to this one) and turns its
result into table rows: what the row compares, boss-agent's number, the peer's
number, the ratio, the goal (only where the issue sets one) and a verdict. A group
that fails still yields its rows, each carrying the error, and the suite goes on.
No number in a row is written here: every cell is formatted from a measurement.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

from bench import (
    bench_appserver,
    bench_card,
    bench_daemon,
    bench_gateway,
    bench_progress,
    bench_runner,
)

logger = logging.getLogger(__name__)

GROUP_TIMEOUT_S = 240.0  # one group of the full suite takes at most ~90 s; this bounds a wedged peer
ERROR_CHARS = 160  # an error fits on one table line
WARM_TURN_GOAL = 1.10  # issue 10: boss-agent's layers add at most 10 % to a warm turn
CARD_GOAL = 3.0  # issue 10: reducer + serializer at most 3x the JSON parse


@dataclass(frozen=True)
class Sizes:
    """How much each group measures: the full suite, or the ``--quick`` smoke."""

    appserver_requests: int = 200
    appserver_turns: int = 20
    runner_samples: int = 15
    warmup: int = bench_appserver.WARMUP
    concurrent_tasks: int = 8
    stream_chunks: int = bench_runner.STREAM_CHUNKS
    stream_delay_s: float = bench_runner.STREAM_DELAY_S
    card_messages: int = bench_card.MESSAGES
    card_rounds: int = bench_card.ROUNDS
    serialize_samples: int = bench_card.SERIALIZE_SAMPLES
    storm_s: float = bench_progress.DEFAULT_SECONDS
    storm_rate: float = bench_progress.DEFAULT_RATE
    idle_window_s: float = 60.0
    daemon_tasks: int = 5
    gateway_events: int = bench_gateway.EVENTS
    gateway_tasks: int = bench_gateway.TASKS
    xadd_requests: int = bench_gateway.XADD_REQUESTS
    reuse_samples: int = 5


FULL = Sizes()
QUICK = Sizes(appserver_requests=10, appserver_turns=2, runner_samples=2, warmup=1, concurrent_tasks=4,
              stream_chunks=10, stream_delay_s=0.01, card_messages=5000, card_rounds=1, serialize_samples=200,
              storm_s=1.0, idle_window_s=2.0, daemon_tasks=1, gateway_events=100,
              gateway_tasks=20, xadd_requests=2000, reuse_samples=1)


@dataclass
class Row:
    row: str
    compares: str
    boss_agent: str = "—"
    peer: str = "—"
    ratio: str = "—"
    goal: str = "—"
    verdict: str = "n/a"  # ok | over goal | n/a | error


Cells = tuple[str, str, str, str, str]  # boss-agent, peer, ratio, goal, verdict


def at_most(value: float, goal: float) -> str:
    return "ok" if value <= goal else "over goal"


def no_goal(boss: str, peer: str, ratio: str) -> Cells:
    return boss, peer, ratio, "—", "n/a"


@dataclass(frozen=True)
class Group:
    name: str
    rows: tuple[tuple[str, str], ...]  # (row id, what it compares), in table order
    measure: Callable[[Sizes], dict[str, Any]]
    cells: Callable[[dict[str, Any]], list[Cells]]


def _async(make: Callable[[Sizes], Awaitable[dict[str, Any]]]) -> Callable[[Sizes], dict[str, Any]]:
    async def bounded(sizes: Sizes) -> dict[str, Any]:
        async with asyncio.timeout(GROUP_TIMEOUT_S):
            return await make(sizes)

    return lambda sizes: asyncio.run(bounded(sizes))


# ------------------------------------------------------------------ the cells of each group


def _appserver_cells(r: dict[str, Any]) -> list[Cells]:
    turn, request = r["warm_turn"], r["warm_request_config_read"]
    return [(f"{turn['boss_agent_ms']:.1f} ms", f"{turn['direct_ms']:.1f} ms", f"{turn['ratio']:.2f}",
             f"≤ {WARM_TURN_GOAL:.2f}", at_most(turn["ratio"], WARM_TURN_GOAL)),
            no_goal(f"{request['boss_agent_ms']:.3f} ms", f"{request['direct_ms']:.3f} ms",
                    f"{request['ratio']:.2f}")]


def _runner_cells(r: dict[str, Any]) -> list[Cells]:
    return [(f"{r['runner_ms']:.1f} ms (git facts alone {r['after_turn_facts_ms']:.0f} ms)",
             f"{r['direct_ms']:.1f} ms", f"{r['ratio']:.2f}",
             f"≤ {WARM_TURN_GOAL:.2f}", at_most(r["ratio"], WARM_TURN_GOAL)),
            # The runner layer alone: no second codex child whose own speed differs.
            (f"{r['runner_ms']:.1f} ms", f"{r['same_server_ms']:.1f} ms", f"{r['same_server_ratio']:.2f}",
             f"≤ {WARM_TURN_GOAL:.2f}", at_most(r["same_server_ratio"], WARM_TURN_GOAL))]


def _daemon_cells(r: dict[str, Any]) -> list[Cells]:
    return [no_goal(f"{r['claim_to_turn_daemon_ms']:.0f} ms", f"{r['claim_to_turn_direct_ms']:.0f} ms",
                    f"{r['claim_to_turn_ratio']:.2f} ({r['claim_to_turn_added_ms']:+.0f} ms)"),
            no_goal(f"{r['task_daemon_ms']:.0f} ms", f"{r['task_direct_ms']:.0f} ms", f"{r['task_ratio']:.2f}"),
            no_goal(f"RSS {r['idle_daemon_rss_mb']:.0f} MB, CPU {r['idle_daemon_cpu_pct']:.2f} %",
                    f"codex processes: RSS {r['idle_children_rss_mb']:.0f} MB, "
                    f"CPU {r['idle_children_cpu_pct']:.2f} %", f"over {r['idle_window_s']:.0f} s")]


def _concurrency_cells(r: dict[str, Any]) -> list[Cells]:
    return [no_goal(f"{r['concurrent_s']:.2f} s ({r['tasks']} at once; codex CPU "
                    f"{r['codex_cpu_ms_per_task']:.0f} ms/task on {r['cpus']} CPUs)",
                    f"{r['sequential_s']:.2f} s ({r['tasks']} in a row)",
                    f"{r['speedup']:.2f}x speed-up (bare client {r['bare_client_speedup']:.2f}x)")]


def _card_cells(r: dict[str, Any]) -> list[Cells]:
    return [(f"{r['reduce_msgs_per_s']:,} msg/s", f"{r['json_loads_msgs_per_s']:,} msg/s",
             f"{r['ratio']:.2f}", f"≤ {CARD_GOAL:.0f}", at_most(r["ratio"], CARD_GOAL))]


def _storm_cells(r: dict[str, Any]) -> list[Cells]:
    limit = r["max_uploads_per_s"]
    ok = r["uploads_per_s"] <= limit and r["final_card_exact"]
    uploads = (f"{r['uploads_per_s']:.2f} uploads/s ({r['uploads_during_storm']} in {r['seconds']:.1f} s"
               f" + final), final card {'exact' if r['final_card_exact'] else 'WRONG'}")
    return [(uploads,
             f"{r['deltas_per_s']:,.0f} deltas/s fed",
             f"1 upload per {r['deltas_fed'] / max(r['uploads_total'], 1):,.0f} deltas",
             f"≤ {limit:g}/s, final exact", "ok" if ok else "over goal")]


def _gateway_cells(r: dict[str, Any]) -> list[Cells]:
    xadd = r["redis_xadd_per_s_1_client"]
    return [no_goal(f"{r['events_per_s']:,.0f} events/s", f"{xadd:,.0f} XADD/s (1 client)",
                    f"{r['events_per_s'] / xadd:.3g}"),
            no_goal(f"{r['tasks_per_s']:,.0f} tasks/s", f"{xadd:,.0f} XADD/s (1 client)",
                    f"{r['tasks_per_s'] / xadd:.3g}")]


def _reuse_cells(r: dict[str, Any]) -> list[Cells]:
    return [no_goal(f"{r['warm_start_ms']:.0f} ms (task {r['warm_task_ms']:.0f} ms)",
                    f"{r['spawn_start_ms']:.0f} ms (task {r['spawn_task_ms']:.0f} ms)",
                    f"{r['start_ratio']:.3f} ({r['start_speedup']:.1f}x faster)")]


GROUPS: tuple[Group, ...] = (
    Group("appserver", (("1a", "warm turn: our AppServer client vs a minimal direct JSON-RPC client"),
                        ("1c", "warm request (config/read): our client vs the direct client")),
          _async(lambda s: bench_appserver.run(s.appserver_requests, s.appserver_turns, s.warmup)), _appserver_cells),
    Group("runner_vs_direct", (("1b", "warm task turn: Runner.run vs direct client (thread/start + turn)"),
                               ("1d", "warm task turn: Runner.run vs the same turn via our client, same app-server")),
          _async(lambda s: bench_runner.runner_vs_direct(s.runner_samples, s.warmup)), _runner_cells),
    Group("daemon", (("2a", "claim -> turn/start: daemon + local control plane vs runner direct"),
                     ("2b", "whole task: daemon + local control plane vs runner direct"),
                     ("6", "idle daemon (heartbeats, long polls): RSS and CPU")),
          _async(lambda s: bench_daemon.bench(s.idle_window_s, s.daemon_tasks)), _daemon_cells),
    Group("concurrency", (("3", "tasks on one shared app-server (8; --quick: 4): concurrent vs sequential"),),
          _async(lambda s: bench_runner.concurrency(s.concurrent_tasks, s.stream_chunks, s.stream_delay_s)),
          _concurrency_cells),
    Group("card", (("4", "card reducer + serializer vs json.loads, same transcript"),),
          lambda s: bench_card.run(s.card_messages, s.card_rounds, s.serialize_samples), _card_cells),
    Group("progress_storm", (("5", "progress uploads per task under a 1,000 deltas/s storm"),),
          _async(lambda s: bench_progress.storm(s.storm_s, s.storm_rate)), _storm_cells),
    Group("gateway", (("7a", "gateway events/s vs redis-benchmark XADD, same server"),
                      ("7b", "gateway tasks/s vs redis-benchmark XADD, same server")),
          lambda s: bench_gateway.run(s.gateway_events, s.gateway_tasks, s.xadd_requests), _gateway_cells),
    Group("reuse", (("8", "task start: warm shared app-server vs an app-server spawned per task"),),
          _async(lambda s: bench_runner.reuse(s.reuse_samples)), _reuse_cells),
)


def run_group(group: Group, sizes: Sizes) -> tuple[dict[str, Any], list[Row]]:
    """Measure one group; on failure its rows carry the error instead of numbers."""
    start = time.monotonic()
    try:
        raw = group.measure(sizes)
        cells = group.cells(raw)
    except Exception as exc:  # a failing peer fails its rows, never the suite
        logger.debug("bench group %s failed", group.name, exc_info=True)
        message = f"error: {exc.__class__.__name__}: {exc}"[:ERROR_CHARS]
        rows = [Row(row, compares, boss_agent=message, verdict="error") for row, compares in group.rows]
        return {"error": message, "elapsed_s": round(time.monotonic() - start, 1)}, rows
    raw = {**raw, "elapsed_s": round(time.monotonic() - start, 1)}
    return raw, [Row(row, compares, *cell) for (row, compares), cell in zip(group.rows, cells, strict=True)]


def run_suite(sizes: Sizes, only: set[str] | None = None,
              progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run the groups (``only``: group names), return ``{"rows": [...], "raw": {...}}`` sorted by row."""
    rows: list[Row] = []
    raw: dict[str, Any] = {}
    for group in GROUPS:
        if only and group.name not in only:
            continue
        if progress:
            progress(group.name)
        raw[group.name], group_rows = run_group(group, sizes)
        rows += group_rows
    rows.sort(key=lambda r: (int(r.row.rstrip("abcdefgh")), r.row))
    return {"rows": [asdict(r) for r in rows], "raw": raw}
