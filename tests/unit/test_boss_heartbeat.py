"""Pure pieces of the heartbeat: the interval clamp, the suspend detector, the loop's
handling of answers (cancels, new interval, 401) with an in-test send function."""

from __future__ import annotations

import asyncio
from typing import Any


from boss_agent.errors import BossUnreachable, Unauthorized
from boss_agent.sources.boss.heartbeat import (
    MAX_HEARTBEAT_INTERVAL_S,
    MIN_HEARTBEAT_INTERVAL_S,
    HeartbeatLoop,
    clamp_interval_s,
    watch_clock,
)
from boss_agent.daemon.sysinfo import system_facts
from tests.support.waits import eventually


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


NTP_STEP_S = 2.0  # what time sync moves the wall clock by at once, at most, on a machine that is awake
NTP_STEPS = 6  # together more than the suspend threshold: only one step at a time may count
HOUR_ASLEEP_S = 3600.0
TICK_S = 0.001  # the watcher samples as fast as the test feeds it readings


async def test_a_wall_clock_jump_is_reported_once_and_slewing_is_not() -> None:
    """An hour's suspend is one jump; NTP-sized steps are none, however many add up.
    The threshold is the daemon's own (``SUSPEND_JUMP_S``), not one the test picks."""
    slewed = [NTP_STEP_S * step for step in range(NTP_STEPS + 1)]
    walls = [*slewed, slewed[-1] + HOUR_ASLEEP_S]  # the first is read before the first tick
    reads: list[float] = []
    jumps: list[float] = []

    def wall() -> float:
        reads.append(walls[min(len(reads), len(walls) - 1)])
        return reads[-1]

    async def on_jump(drift: float) -> None:
        jumps.append(drift)

    async with asyncio.TaskGroup() as tg:
        watcher = tg.create_task(watch_clock(on_jump, wall=wall, mono=lambda: 0.0, tick_s=TICK_S))
        await eventually(lambda: len(reads) > len(walls) + 2)  # two ticks more after the jump
        watcher.cancel()
    assert jumps == [HOUR_ASLEEP_S]


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
