"""Thread collaboration: a controlled summary of one thread, injected into another.

The summary carries only what the source thread *answered*: its final agent
messages and its plan, sanitized and bounded. It never carries user prompts,
system or developer instructions, tool output, ids or scheduling fields, so
nothing the source thread was told in confidence reaches the target thread.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from boss_agent.errors import AppServerError, TaskFailed
from boss_agent.redact import sanitize_text

if TYPE_CHECKING:
    from boss_agent.appserver.contract import Client

logger = logging.getLogger(__name__)

MAX_SUMMARY_CHARS = 4000  # a summary, not the thread: bounded so it cannot flood the target context
MAX_ANSWER_CHARS = 1500  # one answer's share of it
MAX_ANSWERS = 3  # the most recent turns matter; older ones are usually superseded
ITEMS_PAGE_LIMIT = 200  # thread/items/list page size; the tail of a thread is what we need
ACK_TEXT = "Noted the summary from the other thread."
HEADER = "[Summary of another Codex thread, shared by the user. Final answers and plan only.]"


def _items(listing: dict[str, Any]) -> list[dict[str, Any]]:
    """``thread/items/list`` wraps items (``{turnId, item}``); ``thread/read`` nests them in turns."""
    out: list[dict[str, Any]] = []
    for entry in listing.get("data") or []:
        if isinstance(entry, dict) and isinstance(entry.get("item"), dict):
            out.append({**entry["item"], "_turn": entry.get("turnId")})
    for turn in (listing.get("thread") or {}).get("turns") or []:
        for item in turn.get("items") or []:
            if isinstance(item, dict):
                out.append({**item, "_turn": turn.get("id")})
    return out


def build_summary(items: list[dict[str, Any]], *, workdir: str | None = None) -> str | None:
    """The summary text from thread items, or None when the thread has no answer yet."""
    answers: dict[Any, str] = {}  # turn -> its last final answer, in turn order
    plan: str | None = None
    for item in items:
        kind = item.get("type")
        if kind == "agentMessage" and item.get("text") and item.get("phase") != "commentary":
            answers[item.get("_turn")] = str(item["text"])
        elif kind == "plan" and item.get("text"):
            plan = str(item["text"])
    if not answers and not plan:
        return None
    parts = [HEADER]
    for text in list(answers.values())[-MAX_ANSWERS:]:
        parts.append("Answer:\n" + sanitize_text(text, workdir=workdir, limit=MAX_ANSWER_CHARS))
    if plan:
        parts.append("Plan:\n" + sanitize_text(plan, workdir=workdir, limit=MAX_ANSWER_CHARS))
    return sanitize_text("\n\n".join(parts), workdir=workdir, limit=MAX_SUMMARY_CHARS)


def inject_items(summary: str) -> list[dict[str, Any]]:
    """The Responses items thread/inject_items takes (facts 3g)."""
    return [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": summary}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": ACK_TEXT}]},
    ]


async def read_source(client: Client, thread_id: str) -> list[dict[str, Any]]:
    try:
        # Newest first, one page: the thread's latest answers; reversed back into turn order.
        listing = await client.thread_items_list(thread_id, limit=ITEMS_PAGE_LIMIT, sortDirection="desc")
        return list(reversed(_items(listing)))
    except AppServerError as exc:
        logger.info("thread/items/list failed (%s); reading the thread instead", exc.__class__.__name__)
    try:
        return _items(await client.thread_read(thread_id, include_turns=True))
    except AppServerError as exc:
        raise TaskFailed("the source thread cannot be read", "source_thread_unavailable") from exc
