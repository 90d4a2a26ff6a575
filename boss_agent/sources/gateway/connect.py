"""The one place a gateway Redis client is made: the daemon's worker and ``doctor`` alike.

``rediss://`` verifies the server's certificate, against ``gateway.redis_ca_file`` when
the owner runs a private CA, else against the system's store; an ACL user and password
travel in the URL (redis-py sends ``AUTH user pass``). Whether the URL is safe enough
to use was decided at load (``netaddr.check_redis_url``). The client is a
``MappedRedis``: its failures are the project's exceptions (``redis_errors.py``).
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from boss_agent.config import GatewaySettings
from boss_agent.sources.gateway.redis_errors import MappedRedis


def redis_client(settings: GatewaySettings, url: str | None = None, **options: Any) -> aioredis.Redis:
    """A client for ``url`` (default ``settings.redis_url``); ``options`` go to redis-py."""
    target = url or settings.redis_url
    if target.lower().startswith("rediss://") and settings.redis_ca_file is not None:
        options.setdefault("ssl_ca_certs", str(settings.redis_ca_file))
    client: aioredis.Redis = MappedRedis.from_url(target, **options)
    return client
