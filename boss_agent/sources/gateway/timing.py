"""The gateway's clocks in one place, each with the reason for its default."""

from __future__ import annotations

from dataclasses import dataclass

from boss_agent.sources.gateway import keys


@dataclass(frozen=True)
class GatewayTiming:
    # The SDK's values: clients call a worker offline once its lease has expired.
    lease_ttl_s: int = keys.DEFAULT_LEASE_TTL_S
    heartbeat_s: float = keys.DEFAULT_HEARTBEAT_S
    # A finite block keeps reads responsive to lost connections (their socket timeout is
    # the block plus slack). Each idle read is a Redis command for each of the two read
    # loops: 15 s instead of 3 s is most of an idle fleet's Redis traffic saved (bench
    # row 14) and the idle daemon's gateway CPU (row 6b). The reads have connections of
    # their own, so the block does not bound the lease refresh (test_gateway_timing.py).
    read_block_ms: int = 15_000
    # How often to look for entries of dead workers. A dead worker's entry is claimed
    # only once its lease has expired (lease_ttl_s) and it has been idle as long, so
    # polling faster than that gains little; each round is a command per agent type.
    reclaim_interval_s: float = 10.0

    @property
    def reclaim_idle_ms(self) -> int:
        """An entry younger than one lease TTL may belong to a worker still starting up."""
        return self.lease_ttl_s * 1000
