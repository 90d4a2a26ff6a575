"""The one rule for ids that become part of a Redis key of the gateway protocol.

Session, message, worker, execution and agent-type ids are embedded in key names, so
they pass a strict allow-list: a hostile or mistyped id can reach neither another key
(``:``), a path (``/``, ``..``) nor a glob (``*``). ``config.py`` checks the owner's
gateway ids with it at load; the gateway checks every id a peer sends.
"""

from __future__ import annotations

import re
from typing import TypeGuard

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
ID_RULE = "letters, digits, '_', '.', '-', starting with a letter or digit, at most 128"


def valid_id(value: object) -> TypeGuard[str]:
    """True for an id safe to embed in a key: letters, digits, ``_ . -``; ≤128 chars."""
    return isinstance(value, str) and _ID.fullmatch(value) is not None and ".." not in value
