"""The gateway's clocks in one place, each with the reason for its default."""

from __future__ import annotations

from dataclasses import dataclass

from boss_agent.sources.gateway import keys


@dataclass(frozen=True)
class GatewayTiming:
    # The SDK's values: clients call a worker offline once its lease has expired.
    lease_ttl_s: int = keys.DEFAULT_LEASE_TTL_S
    heartbeat_s: float = keys.DEFAULT_HEARTBEAT_S
    # A finite block keeps reads responsive to lost connections. Each idle read is a
    # round trip through redis-py for each of the two read loops: 3 s instead of 1 s
    # cuts the idle daemon's gateway CPU to a third (bench row 6b). Not longer: the
    # socket timeout is the block plus slack, and a hung lease refresh must time out
    # and be retried before the lease expires (test_gateway_timing.py).
    read_block_ms: int = 3000
    # How often to look for entries of dead workers; a dead worker's lease needs
    # lease_ttl_s to expire anyway, so polling faster gains little.
    reclaim_interval_s: float = 5.0

    @property
    def reclaim_idle_ms(self) -> int:
        """An entry younger than one lease TTL may belong to a worker still starting up."""
        return self.lease_ttl_s * 1000
