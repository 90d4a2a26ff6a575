"""Progress uploads under a delta storm: the daemon's uploader against a real control plane.

    python -m bench.bench_progress [--seconds 3]

Starts the local control plane (``ControlPlane``) in this process, pairs a device,
submits and claims one task, then drives the Boss source's ``ProgressUploader`` with
about ``rate`` new cards per second for ``seconds`` seconds: each card is the real
reducer's card after one more ``item/agentMessage/delta``, as a streaming answer
produces them. The server side is the real device API; the bench only counts, in the
server, when each progress upload arrived. It reports the uploads per second the
server received (goal: at most ``MAX_UPLOADS_PER_S``) and whether the server's final
card equals the last card fed (it must, exactly).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

from boss_agent.controlplane import ControlPlane
from boss_agent.progress.card import new_card
from boss_agent.progress.reducer import reduce
from boss_agent.sources.boss.api import BossApi
from boss_agent.sources.boss.progress import MAX_UPLOADS_PER_S, ProgressUploader

DEFAULT_SECONDS = 3.0
DEFAULT_RATE = 1000  # deltas per second: a fast model streaming tiny tokens
TICK_S = 0.01  # feed in 10 ms batches: asyncio cannot sleep 1 ms reliably, the rate is kept by catch-up
CLAIM_WAIT_MS = 5000  # the task is queued before the claim, so the claim answers at once
CLOSE_TIMEOUT_S = 30.0  # the final upload is one local HTTP call; this bounds a wedged server


def _opening_messages() -> list[dict[str, Any]]:
    item = {"type": "agentMessage", "id": "msg-storm", "text": ""}
    return [{"method": "turn/started", "params": {"turn": {"id": "turn-storm", "status": "inProgress"}}},
            {"method": "item/started", "params": {"item": item}}]


def storm_cards(count: int, workdir: str) -> list[dict[str, Any]]:
    """The reducer's card after each of ``count`` agent-message deltas, serialized.

    Made before the storm, so the feed keeps its rate even on a loaded machine and
    the event loop is free for the uploader, as it is in the daemon (where the
    runner reduces each message as it arrives, not a thousand in one go).
    """
    card = new_card(workdir=workdir)
    for message in _opening_messages():
        card = reduce(card, message)
    cards = []
    for index in range(count):
        delta = {"method": "item/agentMessage/delta", "params": {"itemId": "msg-storm", "delta": f" w{index}"}}
        card = reduce(card, delta)
        cards.append(card.to_dict())
    return cards


async def _feed(uploader: ProgressUploader, cards: list[dict[str, Any]], seconds: float,
                rate: float) -> tuple[int, float]:
    """Feed ``rate`` cards per second for ``seconds``; return how many were fed and the real span."""
    start = time.monotonic()
    fed = 0
    while True:
        elapsed = min(time.monotonic() - start, seconds)
        target = min(len(cards), max(1, int(elapsed * rate)))
        while fed < target:
            uploader.update(cards[fed])
            fed += 1
        if elapsed >= seconds:
            return fed, time.monotonic() - start
        await asyncio.sleep(TICK_S)  # the pace of the storm, not a wait for a condition


async def _paired(cp: ControlPlane) -> BossApi:
    async with BossApi(cp.url) as anonymous:
        answer = await anonymous.pair(cp.create_pairing_code())
    return BossApi(cp.url, device_id=answer["deviceId"], token=answer["deviceToken"])


async def _claim(cp: ControlPlane, api: BossApi, workdir: str) -> str:
    task_id = cp.submit_task("progress storm", workdir=workdir)
    claimed = await api.claim(1, wait_ms=CLAIM_WAIT_MS)
    if [t.get("taskId") for t in claimed] != [task_id]:
        raise RuntimeError("the control plane did not lease the storm task")
    return task_id


async def storm(seconds: float = DEFAULT_SECONDS, rate: float = DEFAULT_RATE) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-progress-") as tmp:
        async with ControlPlane(Path(tmp) / "boss.db") as cp:
            arrivals: list[float] = []
            record = cp.core.progress

            def counting(device_id: str, task_id: str, seq: int, card: dict[str, Any],
                         refs: dict[str, str] | None = None) -> bool:
                arrivals.append(time.monotonic())
                return record(device_id, task_id, seq, card, refs)

            cp.core.progress = counting  # type: ignore[method-assign]  # count in the server itself
            async with await _paired(cp) as api:
                task_id = await _claim(cp, api, tmp)
                uploader = ProgressUploader(api, task_id, asyncio.Event())
                cards = storm_cards(int(seconds * rate) + 1, tmp)
                async with asyncio.TaskGroup() as tg:
                    running = tg.create_task(uploader.run())
                    fed, span = await _feed(uploader, cards, seconds, rate)
                    storm_uploads = list(arrivals)
                    last = cards[fed - 1]
                    uploader.close(last)
                    await asyncio.wait_for(asyncio.shield(running), CLOSE_TIMEOUT_S)
            final = cp.task(task_id)["executionProgress"]
    exact = json.dumps(final, sort_keys=True) == json.dumps(last, sort_keys=True)
    return {
        "seconds": round(span, 3),
        "deltas_fed": fed,
        "deltas_per_s": round(fed / span, 1),
        "uploads_during_storm": len(storm_uploads),
        "uploads_total": len(arrivals),
        # The storm's uploads over its span; the closing upload comes after the storm.
        "uploads_per_s": round(len(storm_uploads) / span, 2),
        "max_uploads_per_s": MAX_UPLOADS_PER_S,
        "final_card_exact": exact,
        "final_seq": uploader.seq,
    }


def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=DEFAULT_SECONDS, help="storm length")
    parser.add_argument("--rate", type=float, default=DEFAULT_RATE, help="deltas per second")
    args = parser.parse_args()
    logging.getLogger("boss_agent").setLevel(logging.ERROR)
    result = asyncio.run(storm(args.seconds, args.rate))
    for key, value in result.items():
        print(f"{key:24} {value}")
    return result


if __name__ == "__main__":
    main()
