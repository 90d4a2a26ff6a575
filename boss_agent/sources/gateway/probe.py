"""What ``boss-agent doctor`` asks Redis about this device's gateway worker.

Read-only: PING, the worker's lease, and each agent-type stream's consumer group
(its existence, the group's pending entries and this worker's share). It never
creates a group or takes the lease, so doctor can run beside a live daemon; a
missing group or lease before the first start is information, not a problem.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from boss_agent.errors import MissingGroup
from boss_agent.sources.gateway import keys


async def probe_worker(redis: aioredis.Redis, worker_id: str, agent_types: tuple[str, ...],
                       group: str) -> dict[str, Any]:
    """Facts about one worker id: ``lease`` (bool), ``groups`` {agent type: facts or None}."""
    await redis.ping()
    facts: dict[str, Any] = {"lease": bool(await redis.exists(keys.worker_lease(worker_id))),
                             "groups": {}}
    for agent_type in agent_types:
        facts["groups"][agent_type] = await group_pending(redis, keys.agent_type_stream(agent_type),
                                                         group, worker_id)
    return facts


async def group_pending(redis: aioredis.Redis, stream: str, group: str,
                       worker_id: str) -> dict[str, int] | None:
    """``{"pending": the group's, "mine": worker_id's}``, or None without stream or group."""
    try:
        summary = await redis.xpending(stream, group)
    except MissingGroup:  # no stream or no group yet: the worker creates both at start
        return None
    mine = 0
    for consumer in summary.get("consumers") or ():
        if keys.text(consumer.get("name") or "") == worker_id:
            mine = int(consumer.get("pending") or 0)
    return {"pending": int(summary.get("pending") or 0), "mine": mine}


def describe(facts: dict[str, Any], group: str) -> str:
    """One line: the lease, and each agent type's group with its pending entries."""
    parts = []
    for agent_type, found in facts["groups"].items():
        if found is None:
            parts.append(f"{agent_type}: no group {group!r} yet (the daemon creates it)")
        else:
            parts.append(f"{agent_type}: group {group!r}, {found['pending']} pending "
                         f"({found['mine']} read by this worker)")
    lease = "worker lease held" if facts["lease"] else "no worker lease (daemon not running?)"
    return "; ".join([lease, *parts])
