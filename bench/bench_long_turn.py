"""A long turn: 100,000 answer deltas through the runner's card feed and the uploader.

    python -m bench.bench_long_turn [--deltas 100000]

The real ``CardFeed`` (the reducer and the card the runner keeps) feeds the Boss
source's real ``ProgressUploader``, which uploads to the real local control plane in
this process, as a streaming answer does in the daemon. Every ``WINDOW`` deltas the
benchmark records the time per delta over that window, the serialized card's size
and this process's RSS. The row compares the last window with the first one after
``SETTLE`` deltas: a daemon that stays flat over a long turn shows ratios near 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from bench.bench_progress import _claim, _paired
from boss_agent.controlplane import ControlPlane
from boss_agent.progress.card import Card
from boss_agent.runner.feed import CardFeed
from boss_agent.sources.boss.progress import ProgressUploader
from boss_agent.tasks import ApprovalRequest, SinkDefaults

DELTAS = 100_000
SETTLE = 1_000  # the first deltas grow the card to its steady shape; flatness is judged after them
WINDOW = 1_000  # deltas per measurement window
SPREAD = 5  # windows whose median stands for the start and for the end of the turn
YIELD_EVERY = 50  # let the uploader run, as the daemon's loop does between notifications
CLOSE_TIMEOUT_S = 30.0  # the final upload is one local HTTP call


class UploadSink(SinkDefaults):
    """The Boss source's sink, progress only: every card goes to the uploader."""

    def __init__(self, uploader: ProgressUploader) -> None:
        self.uploader = uploader

    async def progress(self, card: Card) -> None:
        self.uploader.update(card)

    async def request_approval(self, request: ApprovalRequest) -> str:
        return "decline"


def _delta(index: int) -> dict[str, Any]:
    return {"method": "item/agentMessage/delta", "params": {"itemId": "msg-long", "delta": f" w{index}"}}


async def _stream(feed: CardFeed, deltas: int) -> list[dict[str, float]]:
    windows: list[dict[str, float]] = []
    process = psutil.Process()
    await feed.feed({"method": "turn/started", "params": {"turn": {"id": "turn-long", "status": "inProgress"}}})
    await feed.feed({"method": "item/started", "params": {"item": {"type": "agentMessage", "id": "msg-long",
                                                                      "text": ""}}})
    start = time.perf_counter()
    for index in range(1, deltas + 1):
        await feed.feed(_delta(index))
        if index % YIELD_EVERY == 0:
            await asyncio.sleep(0)
        if index % WINDOW == 0:
            now = time.perf_counter()
            windows.append({"deltas": index, "us_per_delta": (now - start) / WINDOW * 1e6,
                            "card_bytes": len(json.dumps(feed.to_dict())),
                            "rss_mb": process.memory_info().rss / 2**20})
            start = time.perf_counter()
    return windows


async def run(deltas: int = DELTAS) -> dict[str, Any]:
    if deltas < SETTLE + 2 * SPREAD * WINDOW:
        raise ValueError(f"a long turn needs at least {SETTLE + 2 * SPREAD * WINDOW} deltas")
    with tempfile.TemporaryDirectory(prefix="bench-long-") as tmp:
        async with ControlPlane(Path(tmp) / "boss.db") as cp, await _paired(cp) as api:
            task_id = await _claim(cp, api, tmp)
            uploader = ProgressUploader(api, task_id, asyncio.Event())
            feed = CardFeed(UploadSink(uploader), backend="app_server", workdir=tmp)
            async with asyncio.TaskGroup() as tg:
                running = tg.create_task(uploader.run())
                windows = await _stream(feed, deltas)
                uploader.close(feed.to_dict())
                await asyncio.wait_for(asyncio.shield(running), CLOSE_TIMEOUT_S)
            final = cp.task(task_id)["executionProgress"]
    exact = json.dumps(final, sort_keys=True) == json.dumps(feed.to_dict(), sort_keys=True)
    settled = [w for w in windows if w["deltas"] > SETTLE]
    first, last = settled[0], settled[-1]
    # Medians of a few windows: one window on a shared box can catch a burst of load.
    first_us = statistics.median(w["us_per_delta"] for w in settled[:SPREAD])
    last_us = statistics.median(w["us_per_delta"] for w in settled[-SPREAD:])
    return {"deltas": deltas, "uploads": uploader.seq, "final_card_exact": exact,
            "first_us_per_delta": round(first_us, 1), "last_us_per_delta": round(last_us, 1),
            "time_growth": round(last_us / first_us, 2),
            "first_card_bytes": first["card_bytes"], "last_card_bytes": last["card_bytes"],
            "card_growth": round(last["card_bytes"] / first["card_bytes"], 3),
            "first_rss_mb": round(first["rss_mb"], 1), "last_rss_mb": round(last["rss_mb"], 1),
            "rss_growth": round(last["rss_mb"] / first["rss_mb"], 3),
            "windows": windows[:: max(1, len(windows) // 10)]}


def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=DELTAS, help="answer deltas in the turn")
    args = parser.parse_args()
    logging.getLogger("boss_agent").setLevel(logging.ERROR)
    result = asyncio.run(run(args.deltas))
    for key, value in result.items():
        if key != "windows":
            print(f"{key:20} {value}")
    return result


if __name__ == "__main__":
    main()
