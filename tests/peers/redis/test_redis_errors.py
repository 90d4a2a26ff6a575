"""Redis's errors reach the gateway as the project's exceptions, mapped once (redis_errors.py).

A real redis-server answers each case; the client is the one the gateway uses
(``connect.redis_client``). What the gateway acts on is the class, never the text:
NOGROUP is ``MissingGroup`` (the group is recreated), BUSYGROUP is ``GroupExists``
(tolerated), WRONGTYPE is ``WrongType`` (a clobbered key costs one lookup), and a
refused connection is ``RedisUnavailable``, the only kind the retry policy retries.
Each keeps redis-py's exception as its cause.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
import redis.exceptions as rex

from boss_agent.config import load_config
from boss_agent.errors import (
    GatewayError,
    GroupExists,
    MissingGroup,
    RedisFailure,
    RedisUnavailable,
    WrongType,
)
from boss_agent.sources.gateway.connect import redis_client
from boss_agent.sources.gateway.retry import RedisRetry
from tests.support.ports import free_port
from tests.support.redis_process import RedisProcess

STREAM = "errors:stream"
GROUP = "workers"
CONNECT_TIMEOUT_S = 2.0  # a refused loopback connection fails at once; this only bounds a hang


def _client(url: str) -> aioredis.Redis:
    settings = load_config(overrides={"gateway.redis_url": url}, environ={}).gateway
    return redis_client(settings, socket_connect_timeout=CONNECT_TIMEOUT_S)


@pytest.fixture
async def redis(redis_server: RedisProcess) -> AsyncIterator[aioredis.Redis]:
    client = _client(redis_server.url)
    try:
        yield client
    finally:
        await client.aclose()


async def test_a_read_of_a_missing_group_is_missing_group_and_not_retried(redis: aioredis.Redis) -> None:
    await redis.xadd(STREAM, {"k": "v"})
    with pytest.raises(MissingGroup) as caught:
        await redis.xreadgroup(GROUP, "me", {STREAM: ">"}, count=1)
    assert caught.value.reply == "NOGROUP"
    assert isinstance(caught.value.__cause__, rex.ResponseError)
    assert not RedisRetry().retryable(caught.value)


async def test_creating_a_group_twice_is_group_exists(redis: aioredis.Redis) -> None:
    await redis.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    with pytest.raises(GroupExists) as caught:
        await redis.xgroup_create(STREAM, GROUP, id="0", mkstream=True)
    assert caught.value.reply == "BUSYGROUP" and isinstance(caught.value, GatewayError)


async def test_a_key_of_another_type_is_wrong_type_raised_or_in_a_pipelines_results(
        redis: aioredis.Redis) -> None:
    await redis.set("a-string", "x")
    with pytest.raises(WrongType):
        await redis.smembers("a-string")
    pipe = redis.pipeline(transaction=False)
    pipe.sadd("a-string", "member")
    pipe.sadd("a-set", "member")
    failed, added = await pipe.execute(raise_on_error=False)
    assert isinstance(failed, WrongType) and added == 1
    with pytest.raises(WrongType):
        pipe = redis.pipeline(transaction=False)
        pipe.sadd("a-string", "member")
        await pipe.execute()


async def test_a_refused_connection_is_redis_unavailable_and_retried() -> None:
    client = _client(f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there
    try:
        with pytest.raises(RedisUnavailable) as caught:
            await client.ping()
    finally:
        await client.aclose()
    assert isinstance(caught.value.__cause__, rex.ConnectionError)
    assert isinstance(caught.value, RedisFailure) and RedisRetry().retryable(caught.value)
