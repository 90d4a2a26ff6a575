"""Redis key names of the by-framework wire format, and the id check that guards them.

Every id that becomes part of a key (session, message, worker, agent type) passes
``check_id`` first: a strict allow-list of characters, so a hostile command can
neither reach another key (``:``), a path (``/``, ``..``) nor a glob (``*``).
"""

from __future__ import annotations

from typing import TypedDict

from redis.typing import EncodableT, FieldT

from boss_agent.errors import BadCommand
from boss_agent.ids import valid_id as valid_id  # re-exported: the gateway reads the rule as keys.valid_id

PREFIX = "byai_gateway"
SESSION_TTL_S = 7 * 24 * 3600  # the SDK expires session streams and registries after 7 days
DATA_STREAM_MAXLEN = 10_000  # approximate cap per session stream; a session never needs more history
DEFAULT_LEASE_TTL_S = 15  # the SDK's online-lease TTL: clients treat a worker as gone after this
DEFAULT_HEARTBEAT_S = 5  # the SDK refreshes the lease every 5 s, three chances per TTL

EXEC_FIELD = "exec:"
MSG_MAP_FIELD = "msg_map:"
KNOWN_WORKERS = f"{PREFIX}:registry:workers"

StreamFields = dict[FieldT, EncodableT]  # an entry's fields as redis-py's XADD takes them

# What the stream commands return with ``decode_responses`` off (redis-py annotates every
# reply as a union of all RESP types, so the gateway names the shapes it relies on).
StreamReply = list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes]]]]]  # XREADGROUP
ClaimReply = list[tuple[bytes, dict[bytes, bytes] | None]]  # XCLAIM: None for an entry deleted since


class PendingEntry(TypedDict):
    """One row of XPENDING's extended form, as redis-py parses it."""

    message_id: bytes
    consumer: bytes
    time_since_delivered: int
    times_delivered: int


def text(value: bytes | str) -> str:
    """A Redis reply as text: the client returns bytes (``decode_responses`` is off)."""
    return value.decode() if isinstance(value, bytes) else value


def check_id(value: object, what: str) -> str:
    if not valid_id(value):
        raise BadCommand(f"{what} is not a valid id")
    return value


def agent_type_stream(agent_type: str) -> str:
    return f"{PREFIX}:ctrl:agent_type:{agent_type}"


def worker_stream(worker_id: str) -> str:
    return f"{PREFIX}:ctrl:worker:{worker_id}"


def data_stream(session_id: str) -> str:
    return f"{PREFIX}:session:{session_id}:data_stream"


def session_registry(session_id: str) -> str:
    return f"{PREFIX}:session:{session_id}:registry"


def worker_lease(worker_id: str) -> str:
    return f"{PREFIX}:registry:worker:online:{worker_id}"


def agent_type_members(agent_type: str) -> str:
    return f"{PREFIX}:registry:agent_type:workers:{agent_type}"


def worker_agent_types(worker_id: str) -> str:
    return f"{PREFIX}:registry:worker:agent_types:{worker_id}"


def thread_holder(thread_ref: str) -> str:
    """The worker holding a Codex thread (fleet.py): its rollout is on that device."""
    return f"{PREFIX}:registry:thread:{thread_ref}"


def turn_holder(turn_id: str) -> str:
    return f"{PREFIX}:registry:turn:{turn_id}"


def held_threads(worker_id: str) -> str:
    return f"{PREFIX}:registry:worker:threads:{worker_id}"
