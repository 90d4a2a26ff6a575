"""The Redis Streams gateway: boss-agent as a by-framework worker (wire format only).

Entry point: ``Gateway`` (gateway.py). The modules, in the order a command travels:
``wire`` (parse commands, build events), ``gateway`` (loops, dispatch), ``resume``
(RESUME/CANCEL routing), ``execution`` (one task: claim, run, report, ack), ``sink``
(the TaskSink: card, answer, approvals → events), ``registry`` (lease, membership,
execution records), ``keys`` (key names, id checks), ``retry``, ``timing``.
by-framework itself is never imported here: it is only the test peer.
"""

from boss_agent.sources.gateway.gateway import Gateway
from boss_agent.sources.gateway.retry import RedisRetry
from boss_agent.sources.gateway.timing import GatewayTiming

__all__ = ["Gateway", "GatewayTiming", "RedisRetry"]
