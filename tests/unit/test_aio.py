"""race() and periodic(): the one home of "first of two awaitables" and "wake or interval"."""

import asyncio

import pytest

from boss_agent.aio import periodic, race

BOUND_S = 10  # every wait below is on an event; this only stops a broken helper hanging the run


async def test_race_returns_the_winner_and_cancels_the_loser():
    never = asyncio.Event()
    gate = asyncio.Event()

    async def winner() -> str:
        await gate.wait()
        return "won"

    gate.set()
    async with asyncio.timeout(BOUND_S):
        won, lost = await race(winner(), never.wait())
    assert won.result() == "won"
    assert lost.cancelled()


async def test_race_never_cancels_a_future_the_caller_owns():
    owned = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()
    stop.set()
    async with asyncio.timeout(BOUND_S):
        watched, stopped = await race(owned, stop.wait())
    assert stopped.result() is True
    assert watched is owned and not owned.done()  # still pending, still the caller's to resolve
    owned.set_result("later")


async def test_race_keeps_the_result_of_a_loser_that_finished_in_the_same_step():
    async def now(value: int) -> int:
        return value

    async with asyncio.timeout(BOUND_S):
        first, second = await race(now(1), now(2))
    assert (first.result(), second.result()) == (1, 2)  # neither was cancelled: both had finished


async def test_race_raises_a_contenders_error_after_cancelling_the_other():
    never = asyncio.Event()
    other_cancelled = asyncio.Event()

    async def fails() -> None:
        raise LookupError("boom")

    async def waits() -> None:
        try:
            await never.wait()
        except asyncio.CancelledError:
            other_cancelled.set()
            raise

    with pytest.raises(LookupError, match="boom"):
        async with asyncio.timeout(BOUND_S):
            await race(fails(), waits())
    assert other_cancelled.is_set()


async def test_cancelling_the_caller_cancels_the_contenders_it_made():
    started = asyncio.Event()
    ended = asyncio.Event()

    async def sleeper() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            ended.set()

    caller = asyncio.create_task(race(sleeper(), asyncio.Event().wait()))
    async with asyncio.timeout(BOUND_S):
        await started.wait()
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
    assert ended.is_set()


async def test_periodic_ticks_at_once_then_when_woken_and_ends_when_told():
    wake, until = asyncio.Event(), asyncio.Event()
    ticks: list[int] = []
    async with asyncio.timeout(BOUND_S):
        async for tick in periodic(3600, wake=wake, until=until):
            ticks.append(tick)
            if tick == 0:
                wake.set()  # set while working on a tick: kept for the next wait, never lost
            elif tick == 1:
                until.set()
    assert ticks == [0, 1]


async def test_periodic_ticks_again_when_the_interval_passes():
    ticks = 0
    async with asyncio.timeout(BOUND_S):
        async for ticks in periodic(0.001):
            if ticks == 3:
                break
    assert ticks == 3


async def test_periodic_waits_for_its_gate_before_each_tick():
    gate = asyncio.Event()
    ticked = asyncio.Event()

    async def loop() -> None:
        async for _ in periodic(3600, gate=gate):
            ticked.set()
            return

    task = asyncio.create_task(loop())
    await asyncio.sleep(0)  # let the loop reach its gate
    assert not ticked.is_set()
    gate.set()
    async with asyncio.timeout(BOUND_S):
        await task
    assert ticked.is_set()


async def test_race_leaves_a_watched_futures_error_to_its_owner():
    owned = asyncio.get_running_loop().create_future()
    owned.set_exception(LookupError("the owner reads this"))
    async with asyncio.timeout(BOUND_S):
        watched, other = await race(owned, asyncio.Event().wait())
    assert other.cancelled()
    with pytest.raises(LookupError):
        watched.result()
