"""The retry policy object: what it retries, and that it gives up on what it should not."""

from __future__ import annotations

import pytest
import redis.exceptions as rex

from boss_agent.sources.gateway.retry import FAST_POLICY, RedisRetry, is_retryable


@pytest.mark.parametrize(("exc", "retry"), [
    (rex.ConnectionError("down"), True), (rex.TimeoutError("slow"), True),
    (rex.BusyLoadingError("loading"), True), (rex.ResponseError("READONLY replica"), True),
    (rex.ResponseError("LOADING dataset"), True), (ConnectionResetError(), True),
    (rex.ResponseError("NOGROUP no such group"), False), (rex.ResponseError("WRONGTYPE"), False),
    (ValueError("bug"), False), (KeyError("bug"), False),
])
def test_only_outage_errors_are_retryable(exc, retry):
    assert is_retryable(exc) is retry


async def test_a_flaky_call_is_retried_until_it_succeeds():
    failures = [rex.ConnectionError("down")] * 3

    async def flaky() -> str:
        if failures:
            raise failures.pop()
        return "ok"

    assert await FAST_POLICY.call("flaky", flaky) == "ok"
    assert failures == []


async def test_a_fatal_error_is_raised_at_once_and_a_bounded_policy_gives_up():
    calls = []

    async def broken() -> None:
        calls.append(1)
        raise rex.ResponseError("WRONGTYPE Operation against a key")

    with pytest.raises(rex.ResponseError):
        await FAST_POLICY.call("broken", broken)
    assert len(calls) == 1

    async def down() -> None:
        raise rex.ConnectionError("down")

    with pytest.raises(rex.ConnectionError):
        await RedisRetry(initial_s=0.01, max_s=0.02, give_up_after_s=0.1).call("down", down)
