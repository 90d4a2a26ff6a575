"""The one ISO-8601 UTC formatter: every timestamp boss-agent writes ends in ``Z``.

Seconds precision (``2026-11-30T15:10:46Z``) for the state file, heartbeats, the
control plane's API and capability discovery; milliseconds (``…46.123Z``) where events
are ordered closely: the progress card and the JSON log lines.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime


def utc_iso(epoch_s: float | None = None, *, ms: bool = False) -> str:
    """``epoch_s`` (default: now) as ISO-8601 UTC with a ``Z``; ``ms`` keeps milliseconds."""
    when = datetime.fromtimestamp(time.time() if epoch_s is None else epoch_s, UTC)
    text = when.isoformat(timespec="milliseconds" if ms else "seconds")
    return text.removesuffix("+00:00") + "Z"


def utc_now() -> str:
    """Now, to the second (the state file's and the heartbeat's stamps)."""
    return utc_iso()
