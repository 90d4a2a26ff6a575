"""How big the card may grow: the list caps, and the byte budget of the serialized card.

execution-progress.md *Bounds*: at most ``MAX_STEPS`` plan steps, ``MAX_APPROVALS``
approvals, ``MAX_FILE_CHANGES`` file changes, ``MAX_TOOL_ACTIVITIES`` tool activities
and ``MAX_BACKGROUND_AGENTS`` background agents are kept; the newest and every
unresolved entry win, and the card says how many it left out (``omitted``). The
serialized card stays under ``CARD_MAX_BYTES`` whatever its strings hold:
``fit_wire`` is the last guard, on the wire dict itself, so it also trims a card
that is already serialized (a spooled ``complete``, a ``413`` answer).

The reducer applies the caps as each entry arrives (``trim`` drops one entry per
append, a scan of at most the cap), so a long turn costs the same per message at its
end as at its start.
"""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

MAX_STEPS = 200
MAX_APPROVALS = 200
MAX_FILE_CHANGES = 500
# The contract allows up to 200; the card keeps 50, as it always did: a tool activity is a
# fixed label, the newest 50 tell the story, and four times as many made the card's
# serializer the slowest step of the delta path (bench row 4 went from 1.9x to 2.4x).
MAX_TOOL_ACTIVITIES = 50
MAX_BACKGROUND_AGENTS = 50
MAX_ARTIFACTS = 200  # not in the contract's list, but nothing on the card grows without bound
CARD_MAX_BYTES = 256 * 1024  # the contract: the serialized card stays under this
# What the card itself may take: the upload body around it (deviceId, seq, refs, and in
# ``complete`` the result's small fields) stays under CARD_MAX_BYTES too.
CARD_BUDGET_BYTES = CARD_MAX_BYTES - 4 * 1024
SHORT_STRING_CHARS = 40  # the last resort of ``fit_wire``: every string becomes a label

# The lists ``omitted`` always reports, in the card's own key names.
COUNTED = ("steps", "approvals", "fileChanges", "toolActivities", "backgroundAgents", "artifacts")
# Every list the byte guard may shorten, the biggest offenders first when sizes tie.
TRIMMABLE = ("fileChanges", "approvals", "toolActivities", "steps", "mcpServers",
             "threadCollaboration", "backgroundAgents", "warnings", "artifacts")

# Unresolved entries outrank resolved ones; a step in progress outranks a pending one.
_OPEN_STATUS = {"inProgress": 2, "pending": 1, "running": 1}


def status_rank(record: Any) -> int:
    """How much an entry must stay: 2 in progress, 1 pending or running, 0 settled.

    Works on card records and on their wire dicts alike; an approval codex already
    resolved (the decision is on its way) counts as settled.
    """
    if isinstance(record, dict):
        return _OPEN_STATUS.get(record.get("status"), 0)  # type: ignore[arg-type]
    status = getattr(record, "status", None)
    if getattr(record, "resolved", False):
        return 0
    return _OPEN_STATUS.get(status, 0) if isinstance(status, str) else 0


def trim(records: Sequence[T], cap: int,
         rank: Callable[[T], int] = status_rank) -> tuple[tuple[T, ...], int]:
    """At most ``cap`` of ``records`` in their order, and how many were left out.

    The lowest-ranked, oldest entries go first: every unresolved entry stays while
    they fit, the newest resolved ones fill the rest. Appending one entry to a full
    list drops one, found in a single scan.
    """
    excess = len(records) - cap
    if excess <= 0:
        return tuple(records), 0
    if excess == 1:  # one appended to a full list: usually its oldest entry is settled
        drop = {_first_lowest(records, rank)}
    else:
        drop = set(heapq.nsmallest(excess, range(len(records)), key=lambda i: (rank(records[i]), i)))
    return tuple(r for i, r in enumerate(records) if i not in drop), excess


def _first_lowest(records: Sequence[T], rank: Callable[[T], int]) -> int:
    """The index of the oldest entry of the lowest rank; stops at the first settled one."""
    best, best_rank = 0, None
    for index, record in enumerate(records):
        value = rank(record)
        if value == 0:
            return index
        if best_rank is None or value < best_rank:
            best, best_rank = index, value
    return best


def wire_size(card: Any) -> int:
    """Bytes of ``card`` as the HTTP client sends it (compact UTF-8 JSON)."""
    return len(json.dumps(card, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace"))


def fit_wire(card: dict[str, Any], budget: int = CARD_BUDGET_BYTES) -> dict[str, Any]:
    """``card`` (a serialized card) within ``budget`` bytes; unchanged when it fits.

    The biggest list loses just enough of its lowest-ranked, oldest entries, then the
    next, each counted in ``omitted``; a card still too big with every list empty has
    its strings cut to labels. Returns a new dict; ``card`` is never changed.
    """
    size = wire_size(card)
    if size <= budget:
        return card
    out = dict(card)
    omitted = dict(out.get("omitted") or {})
    while size > budget:
        lists = [(wire_size(out[name]), name) for name in TRIMMABLE
                 if isinstance(out.get(name), list) and out[name]]
        if not lists:
            break
        list_bytes, name = max(lists)
        entries = out[name]
        per_entry = list_bytes / len(entries)
        # Drop enough entries for the excess, and never fewer than one.
        drop = min(len(entries), max(1, math.ceil((size - budget) / per_entry)))
        kept, dropped = trim(entries, len(entries) - drop)
        out[name] = list(kept)
        omitted[name] = omitted.get(name, 0) + dropped
        out["omitted"] = omitted
        size = wire_size(out)
    if size > budget:
        out = _labels(out)
    return out


def _labels(value: Any) -> Any:
    """Every string cut to ``SHORT_STRING_CHARS`` (they were sanitized already)."""
    if isinstance(value, str):
        return value if len(value) <= SHORT_STRING_CHARS else value[: SHORT_STRING_CHARS - 1] + "…"
    if isinstance(value, list):
        return [_labels(v) for v in value]
    if isinstance(value, dict):
        return {k: _labels(v) for k, v in value.items()}
    return value


MAX_RESULT_BYTES = 1024 * 1024  # device API §5: resultText over 1 MiB is cut with a marker
RESULT_CUT_MARKER = "\n\n[… cut: the answer was longer than this report carries]"


def cut_result_text(text: str | None, max_bytes: int = MAX_RESULT_BYTES) -> str | None:
    """``text`` within ``max_bytes`` of UTF-8, its head kept and ``RESULT_CUT_MARKER``
    at the cut. The text is already masked, so a cut never shows half a secret."""
    if text is None or len(text) * 4 <= max_bytes:  # four bytes a char at most: it fits
        return text
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= max_bytes:
        return text
    room = max(0, max_bytes - len(RESULT_CUT_MARKER.encode("utf-8")))
    return raw[:room].decode("utf-8", "ignore") + RESULT_CUT_MARKER
