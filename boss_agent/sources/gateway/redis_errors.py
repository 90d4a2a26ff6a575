"""Redis errors, mapped once: redis-py's exceptions become the project's (``errors.py``).

redis-py tells what went wrong partly by class (a connection refused or dropped, a
timeout, a server still loading) and partly only by the first word of Redis's reply
(``NOGROUP``, ``BUSYGROUP``, ``WRONGTYPE`` all arrive as a plain ``ResponseError``).
``map_error`` reads both in one place, from the tables below, so the gateway catches
``MissingGroup`` or ``GroupExists`` and the retry policy asks for ``RedisUnavailable``,
instead of several modules each reading message text. It is the gateway's counterpart
of the Boss API's one httpx mapping (``sources/boss/api.py``).

The gateway's client is a ``MappedRedis`` (made by ``connect.redis_client``): every
command and every pipeline passes ``redis_errors`` there, which raises the mapped
error chained to redis-py's (``raise … from exc``); a pipeline run with
``raise_on_error=False`` gets its failed commands' results mapped the same way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import redis.asyncio as aioredis
import redis.exceptions as rex
from redis.asyncio.client import Pipeline

from boss_agent.errors import (
    GroupExists,
    MissingGroup,
    RedisFailure,
    RedisUnavailable,
    WrongType,
)

MESSAGE_CHARS = 200  # Redis's error text names keys; a log line needs only its start
PIPELINE_MARKER = "of pipeline caused error: "  # how redis-py rewords a failed pipelined command

# Redis's first word for the replies the gateway acts on (redis-py keeps it in the text).
BY_REPLY: Mapping[str, type[RedisFailure]] = {
    "NOGROUP": MissingGroup,
    "UNBLOCKED": MissingGroup,  # the stream (and its group) was deleted while a read blocked on it
    "BUSYGROUP": GroupExists,
    "WRONGTYPE": WrongType,
    # Normally redis-py's own classes below; by their word too when a text keeps it.
    "READONLY": RedisUnavailable,
    "LOADING": RedisUnavailable,
    "MASTERDOWN": RedisUnavailable,
    "TRYAGAIN": RedisUnavailable,
}
# redis-py's own classes (it strips the reply's word from their text).
BY_CLASS: tuple[tuple[type[BaseException], type[RedisFailure]], ...] = (
    # A replica promoted mid-outage, a server still loading its data set, a failover.
    (rex.ReadOnlyError, RedisUnavailable),
    (rex.TryAgainError, RedisUnavailable),
    (rex.ClusterDownError, RedisUnavailable),  # MASTERDOWN, CLUSTERDOWN
    (rex.ConnectionError, RedisUnavailable),  # refused, dropped, BusyLoadingError (LOADING)
    (rex.TimeoutError, RedisUnavailable),
    (ConnectionError, RedisUnavailable),
    (TimeoutError, RedisUnavailable),
    (OSError, RedisUnavailable),
)


def map_error(exc: BaseException) -> BaseException:
    """The project's exception for a Redis failure; anything else comes back as it is."""
    if isinstance(exc, RedisFailure):
        return exc
    text = str(exc)[:MESSAGE_CHARS] or type(exc).__name__
    for raised, mapped in BY_CLASS:
        if isinstance(exc, raised):
            return mapped(text)
    if isinstance(exc, rex.ResponseError):
        word = _reply_word(str(exc))  # the whole text: a pipelined command's may be long
        return BY_REPLY.get(word, RedisFailure)(text, word)
    if isinstance(exc, rex.RedisError):
        return RedisFailure(text)
    return exc


def _reply_word(text: str) -> str:
    """Redis's error word (``NOGROUP``…), also out of redis-py's pipeline wording
    ("Command # 1 (SADD …) of pipeline caused error: ('WRONGTYPE …',)"); '' if none."""
    _, marker, reply = text.partition(PIPELINE_MARKER)
    word = (reply if marker else text).lstrip("('\"").split(" ", 1)[0]
    return word if word.isupper() else ""


@contextlib.contextmanager
def redis_errors() -> Iterator[None]:
    """Raise a Redis failure inside the block as the project's exception, chained."""
    try:
        yield
    except (rex.RedisError, OSError) as exc:  # ConnectionError and TimeoutError are OSErrors
        mapped = map_error(exc)
        if mapped is exc:
            raise
        raise mapped from exc


class MappedPipeline(Pipeline):
    """A pipeline whose failures are the project's exceptions."""

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        with redis_errors():
            results = await super().execute(raise_on_error)
        return [map_error(r) if isinstance(r, rex.RedisError) else r for r in results]

    async def immediate_execute_command(self, *args: Any, **options: Any) -> Any:
        with redis_errors():  # WATCH and the reads between it and MULTI
            return await super().immediate_execute_command(*args, **options)  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated


class MappedRedis(aioredis.Redis):
    """The gateway's Redis client: redis-py, with every failure mapped by ``map_error``."""

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        with redis_errors():
            return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> MappedPipeline:
        return MappedPipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)
