"""Narrowing untyped JSON from a peer (codex, Boss, Redis) into the shapes the code reads.

A peer's message is ``Any`` until checked. These helpers are the one place that turns
"this should be an object" into a typed value, with the same forgiving rule the
reducer and the sources already follow: a value of the wrong shape reads as empty,
never as an exception three calls later.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def mapping(value: object) -> Mapping[str, Any]:
    """``value`` when it is a JSON object, else an empty one (read-only)."""
    return value if isinstance(value, Mapping) else {}


def obj(value: object) -> dict[str, Any]:
    """``value`` when it is a JSON object (a ``dict``), else a new empty ``dict``."""
    return value if isinstance(value, dict) else {}
