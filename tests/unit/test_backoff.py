"""The shared backoff family: waits, limits, Retry-After, the classifier hook, and the roles."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from tenacity import RetryCallState

from boss_agent.appserver.methods import OverloadRetry
from boss_agent.backoff import Backoff, RestartBackoff, next_wait
from boss_agent.daemon.supervise import SourceSupervisor
from boss_agent.errors import BossApiError, ConfigError, ServerOverloaded
from boss_agent.sources.boss.retry import BossApiRetry
from boss_agent.sources.contract import TaskSource
from boss_agent.sources.gateway.retry import RedisRetry

TINY = Backoff(initial_s=0.001, max_s=0.004, jitter_s=0.0)


class Flaky:
    """Raises the queued errors in order, then answers ``ok``; counts the attempts."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.attempts = 0

    async def __call__(self, *args: object, **kwargs: object) -> tuple[object, ...]:
        self.attempts += 1
        if self.errors:
            raise self.errors.pop(0)
        return (*args, *sorted(kwargs.items()))


async def run(backoff: Backoff, fn: Flaky, *, forever: bool = False) -> list[float]:
    """Drive ``fn`` through ``backoff.retrying``; the waits tenacity chose, in order."""
    waits: list[float] = []

    def record(state: RetryCallState) -> None:
        waits.append(next_wait(state))

    async for attempt in backoff.retrying(forever=forever, before_sleep=record):
        with attempt:
            await fn()
    return waits


async def test_waits_double_up_to_the_cap_and_start_over_after_a_success() -> None:
    first = await run(TINY, Flaky(*[OSError()] * 5))
    assert first == pytest.approx([0.001, 0.002, 0.004, 0.004, 0.004])
    assert await run(TINY, Flaky(OSError())) == pytest.approx([0.001])  # reset, not 0.004


async def test_jitter_stays_within_its_bound() -> None:
    jittered = Backoff(initial_s=0.001, max_s=0.001, jitter_s=0.002)
    waits = await run(jittered, Flaky(*[OSError()] * 20))
    assert all(0.001 <= wait <= 0.003 for wait in waits)
    assert len(set(waits)) > 1  # random, not a constant


async def test_retry_after_is_obeyed_up_to_the_cap_only_when_the_role_reads_it() -> None:
    asked = BossApiError(503, "busy", "later")
    asked.retry_after = 30.0
    capped = Backoff(initial_s=0.001, max_s=0.001, jitter_s=0.0, retry_after_cap_s=0.002)
    assert await run(capped, Flaky(asked)) == pytest.approx([0.002])
    small = BossApiError(503, "busy", "later")
    small.retry_after = 0.0015
    assert await run(capped, Flaky(small)) == pytest.approx([0.0015])
    assert await run(TINY, Flaky(asked)) == pytest.approx([0.001])  # no cap: header ignored


async def test_the_attempt_and_time_bounds_reraise_the_last_error_unless_forever() -> None:
    bounded = Backoff(initial_s=0.001, max_s=0.001, jitter_s=0.0, max_retries=2)
    flaky = Flaky(*[OSError("down")] * 5)
    with pytest.raises(OSError, match="down"):
        await run(bounded, flaky)
    assert flaky.attempts == 3
    survivor = Flaky(*[OSError()] * 5)
    await run(bounded, survivor, forever=True)
    assert survivor.attempts == 6
    timed = Backoff(initial_s=0.001, max_s=0.001, jitter_s=0.0, give_up_after_s=0.0)
    once = Flaky(OSError("gone"), OSError())
    with pytest.raises(OSError, match="gone"):
        await run(timed, once)
    assert once.attempts == 1


@dataclass(frozen=True)
class OnlyKeyErrors(Backoff):
    def retryable(self, exc: BaseException) -> bool:
        return isinstance(exc, KeyError)


async def test_the_classifier_hook_decides_what_is_retried() -> None:
    role = OnlyKeyErrors.fast()
    flaky = Flaky(KeyError("a"), ValueError("fatal"))
    with pytest.raises(ValueError, match="fatal"):
        await run(role, flaky)
    assert flaky.attempts == 2
    fatal = Flaky(ValueError("at once"))
    with pytest.raises(ValueError):
        await role.call("thing", fatal)
    assert fatal.attempts == 1


async def test_call_passes_arguments_through_and_retries() -> None:
    flaky = Flaky(KeyError("a"), KeyError("b"))
    assert await OnlyKeyErrors.fast().call("thing", flaky, 1, 2, key="v") == (1, 2, ("key", "v"))
    assert flaky.attempts == 3


def test_fast_keeps_the_role_and_its_limits_shape() -> None:
    boss = BossApiRetry.fast()
    assert isinstance(boss, BossApiRetry)
    assert boss.max_s < 1 and boss.give_up_after_s is not None and boss.give_up_after_s < 10
    assert boss.retry_after_cap_s is not None and boss.retry_after_cap_s < 1
    redis = RedisRetry.fast()
    assert redis.give_up_after_s is None and redis.retry_after_cap_s is None
    assert OverloadRetry.fast().max_retries == OverloadRetry().max_retries


def test_each_role_has_its_own_classifier() -> None:
    assert OverloadRetry().retryable(ServerOverloaded(-32001, "overloaded"))
    assert not OverloadRetry().retryable(OSError())
    assert RestartBackoff().retryable(RuntimeError())
    assert not RestartBackoff().retryable(ConfigError("bad"))
    assert BossApiRetry().retryable(BossApiError(503, "busy", "x"))
    assert not BossApiRetry().retryable(BossApiError(400, "bad", "x"))
    assert RedisRetry().retryable(ConnectionResetError())
    assert not RedisRetry().retryable(KeyError())


async def test_a_supervisor_never_restarts_a_source_that_fails_on_its_configuration() -> None:
    made: list[int] = []

    def make() -> TaskSource:
        made.append(1)
        raise ConfigError("gateway.worker_id: expected an id")

    supervisor = SourceSupervisor("gateway", make, policy=RestartBackoff.fast())
    with pytest.raises(ConfigError, match="gateway.worker_id"):
        await asyncio.wait_for(supervisor.run(asyncio.Event()), timeout=5.0)
    assert made == [1]
