"""The gateway's default clocks fit the lease (sources/gateway/timing.py).

The Redis client's socket timeout is the blocking read's length plus slack, and it
bounds every command, the lease refresh too. A refresh that hangs must time out and
be retried before the lease it refreshes expires, or one stuck connection makes the
worker look gone to every client.
"""

from __future__ import annotations

from boss_agent.sources.gateway.gateway import SOCKET_SLACK_S
from boss_agent.sources.gateway.timing import GatewayTiming


def test_a_hung_lease_refresh_times_out_before_the_lease_expires() -> None:
    timing = GatewayTiming()
    socket_timeout_s = timing.read_block_ms / 1000 + SOCKET_SLACK_S
    # The last good refresh was at most one heartbeat ago when the hung one started.
    assert timing.heartbeat_s + socket_timeout_s < timing.lease_ttl_s


def test_an_idle_read_blocks_longer_than_a_second() -> None:
    # Two read loops wake per block while idle; a second-long block cost the idle
    # daemon a third of its CPU (bench row 6b).
    assert GatewayTiming().read_block_ms >= 3000
