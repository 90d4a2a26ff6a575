"""The local control plane with a long history: 10,000 finished tasks in its database.

    python -m bench.bench_controlplane [--tasks 10000]

Starts the real ``ControlPlane`` in this process, pairs a device, and runs ``tasks``
tasks through the device API's core (submit, claim, complete with a realistic card),
so the database holds what a year of use would. Then it measures, over loopback HTTP
as the page and the daemon see them, the page's state load (``GET /api/local/state``)
and a claim answer (``POST .../tasks/claim`` with one task queued), each side by side
with the same request on a control plane with an empty database. Goal: each answers
in at most ``GOAL_MS`` with the long history.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.bench_progress import _paired, storm_cards
from boss_agent.controlplane import ControlPlane
from boss_agent.sources.boss.api import BossApi

TASKS = 10_000
SAMPLES = 30
GOAL_MS = 50.0  # issue 20: the page's state load and a claim answer stay interactive
HTTP_TIMEOUT_S = 30.0  # one loopback request; this bounds a wedged server


async def _history(cp: ControlPlane, device_id: str, tasks: int, workdir: str) -> None:
    """``tasks`` finished tasks, each with the card a short streamed answer leaves."""
    card = storm_cards(40, workdir)[-1]
    result = {"status": "completed", "backend": "app_server", "fallbackFrom": None, "codexThreadRef": None,
              "turnId": None, "resultText": "done", "error": None, "executionProgress": card}
    for index in range(tasks):
        task_id = cp.submit_task(f"history task {index}", workdir=workdir)
        claimed = await cp.core.claim(device_id, 1, 0)
        if [t["taskId"] for t in claimed] != [task_id]:
            raise RuntimeError("the history task was not claimed")
        cp.core.progress(device_id, task_id, 1, card)
        cp.core.complete(device_id, task_id, {"deviceId": device_id, **result})


async def _state_ms(cp: ControlPlane, samples: int) -> float:
    times = []
    async with httpx.AsyncClient(base_url=cp.url, timeout=HTTP_TIMEOUT_S,
                                 headers={"Authorization": f"Bearer {cp.secret}"}) as http:
        for _ in range(samples):
            start = time.perf_counter()
            response = await http.get("/api/local/state")
            response.raise_for_status()
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


async def _claim_ms(cp: ControlPlane, api: BossApi, workdir: str, samples: int) -> float:
    times = []
    for index in range(samples):
        task_id = cp.submit_task(f"claim sample {index}", workdir=workdir)
        start = time.perf_counter()
        claimed = await api.claim(1, wait_ms=5000)
        times.append(time.perf_counter() - start)
        if [t.get("taskId") for t in claimed] != [task_id]:
            raise RuntimeError("the claim did not answer with the queued task")
        await api.complete(task_id, {"status": "cancelled", "error": {"code": "bench", "message": "bench"}})
    return statistics.median(times) * 1000


async def _measure(tasks: int, samples: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-cp-") as tmp:
        async with ControlPlane(Path(tmp) / "boss.db") as cp, await _paired(cp) as api:
            await _history(cp, api.device_id, tasks, tmp)
            return {"state_ms": await _state_ms(cp, samples),
                    "claim_ms": await _claim_ms(cp, api, tmp, samples)}


async def run(tasks: int = TASKS, samples: int = SAMPLES) -> dict[str, Any]:
    start = time.monotonic()
    empty = await _measure(0, samples)
    full = await _measure(tasks, samples)
    return {"tasks": tasks, "samples": samples, "goal_ms": GOAL_MS,
            "state_ms": round(full["state_ms"], 2), "state_empty_ms": round(empty["state_ms"], 2),
            "claim_ms": round(full["claim_ms"], 2), "claim_empty_ms": round(empty["claim_ms"], 2),
            "state_ratio": round(full["state_ms"] / empty["state_ms"], 2),
            "claim_ratio": round(full["claim_ms"] / empty["claim_ms"], 2),
            "setup_s": round(time.monotonic() - start, 1)}


def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=TASKS, help="finished tasks in the database")
    args = parser.parse_args()
    logging.getLogger("boss_agent").setLevel(logging.ERROR)
    result = asyncio.run(run(args.tasks))
    for key, value in result.items():
        print(f"{key:16} {value}")
    return result


if __name__ == "__main__":
    main()
