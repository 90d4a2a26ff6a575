"""Pure pieces of the heartbeat: the interval clamp, the suspend detector, the loop's
handling of answers (cancels, new interval, 401) with an in-test send function."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from boss_agent.errors import BossUnreachable, Unauthorized
from boss_agent.sources.boss.heartbeat import (
    MAX_HEARTBEAT_INTERVAL_S,
    MIN_HEARTBEAT_INTERVAL_S,
    HeartbeatLoop,
    clamp_interval_s,
    watch_clock,
)
from boss_agent.daemon.sysinfo import system_facts


def test_the_server_interval_is_obeyed_within_bounds() -> None:
    assert clamp_interval_s(15_000, 1.0) == 15.0
    assert clamp_interval_s(1, 9.0) == MIN_HEARTBEAT_INTERVAL_S
    assert clamp_interval_s(10**9, 9.0) == MAX_HEARTBEAT_INTERVAL_S
    for junk in (None, "15000", -5, 0, True):
        assert clamp_interval_s(junk, 9.0) == 9.0


def test_system_facts_have_the_contract_keys() -> None:
    facts = system_facts()
    assert set(facts) == {"os", "osVersion", "cpuCount", "memTotalMb", "memAvailableMb",
                          "loadAvg1m", "onBattery"}
    assert facts["cpuCount"] >= 1 and facts["memTotalMb"] >= facts["memAvailableMb"] > 0


async def test_a_wall_clock_jump_is_reported_once_and_slewing_is_not() -> None:
    wall = {"offset": 0.0}
    mono = {"t": 0.0}
    jumps: list[float] = []
    seen = asyncio.Event()

    def tick_wall() -> float:
        mono["t"] += 0.001
        return mono["t"] + wall["offset"]

    async def on_jump(drift: float) -> None:
        jumps.append(drift)
        seen.set()

    async with asyncio.TaskGroup() as tg:
        watcher = tg.create_task(watch_clock(on_jump, wall=tick_wall, mono=lambda: mono["t"],
                                             tick_s=0.001, jump_s=10))
        wall["offset"] = 2.0  # NTP-sized: ignored
        await asyncio.sleep(0.01)
        wall["offset"] = 3602.0  # an hour asleep
        await asyncio.wait_for(seen.wait(), 5)
        await asyncio.sleep(0.01)
        watcher.cancel()
    assert len(jumps) == 1 and jumps[0] == pytest.approx(3600, abs=1)


async def test_the_loop_applies_cancels_and_interval_and_stops_on_401() -> None:
    answers: list[Any] = [{"heartbeatIntervalMs": 2000, "cancelTaskIds": ["tsk_1", 7]},
                          BossUnreachable("down"), Unauthorized(401, "unauthorized", "revoked")]
    cancelled: list[str] = []
    revoked = asyncio.Event()

    async def send(body: dict[str, Any]) -> dict[str, Any]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    loop = HeartbeatLoop(send, lambda: {"state": "idle"}, cancelled.append, revoked.set, 30.0)
    await loop.beat()
    assert cancelled == ["tsk_1"] and loop.interval_s == 2.0 and loop.last["ok"] is True
    await loop.beat()
    assert loop.last["ok"] is False and not revoked.is_set()
    await loop.beat()
    assert revoked.is_set() and loop.last["error"] == "unauthorized"
