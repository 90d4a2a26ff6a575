"""The gateway's default clocks fit the lease (sources/gateway/timing.py).

Every command but the blocking reads runs on a client whose socket timeout is
``COMMAND_TIMEOUT_S``; the reads have connections of their own, timed out at their
block plus slack. A lease refresh that hangs must time out and be retried before the
lease it refreshes expires, or one stuck connection makes the worker look gone to
every client.
"""

from __future__ import annotations

from boss_agent.sources.gateway.gateway import COMMAND_TIMEOUT_S
from boss_agent.sources.gateway.timing import GatewayTiming


def test_a_hung_lease_refresh_times_out_before_the_lease_expires() -> None:
    timing = GatewayTiming()
    # The last good refresh was at most one heartbeat ago when the hung one started;
    # the retry needs a moment too.
    assert timing.heartbeat_s + COMMAND_TIMEOUT_S < timing.lease_ttl_s


def test_an_idle_read_blocks_long_enough_that_reads_are_a_small_share_of_an_idle_fleets_redis_traffic() -> None:
    # Two read loops wake per block while idle; with a 3 s block they were a third of
    # an idle worker's commands (bench row 14), with a second-long one a third of the
    # idle daemon's CPU (row 6b).
    assert GatewayTiming().read_block_ms >= 15_000
