"""What the card learns from the sub-agent threads a task's turn spawns.

The router hands the turn every notification of its child threads (see
``appserver/routing.py``); their approval requests are the task's approvals and go
through ``Approvals`` like the parent's. Their notifications are not the task's
conversation, though: a child's answer is not the task's answer, its ``turn/completed``
must not close the parent's open items and approvals, its thread status is not the
task's. So only the work a child does reaches the card (tool activities, file changes,
approval resolutions), and its turns become a ``backgroundAgents`` entry.
"""

from __future__ import annotations

import logging
from typing import Any

from boss_agent.jsonshape import obj
from boss_agent.runner.feed import CardFeed

logger = logging.getLogger(__name__)

# Items that are a sub-agent's own conversation, never the task's card.
CONVERSATION_ITEMS = frozenset({"agentMessage", "userMessage", "reasoning", "plan",
                                "contextCompaction"})
AGENT_STATUS = {"completed": "completed", "failed": "failed", "interrupted": "interrupted"}


class SubAgents:
    """The children of one task's turn, as the card sees them."""

    def __init__(self, parent_thread: str | None, feed: CardFeed) -> None:
        self.parent_thread = parent_thread
        self.feed = feed

    def is_child(self, params: dict[str, Any]) -> bool:
        thread = params.get("threadId")
        return isinstance(thread, str) and thread != self.parent_thread

    async def note(self, method: str, params: dict[str, Any], raw: dict[str, Any]) -> None:
        """One notification of a child thread."""
        thread = params.get("threadId")
        if method == "turn/started":
            await self.feed.event("backgroundAgent", thread=thread, status="running")
        elif method == "turn/completed":
            turn = obj(params.get("turn"))
            status = AGENT_STATUS.get(str(turn.get("status")), "completed")
            await self.feed.event("backgroundAgent", thread=thread, status=status)
        elif method in ("item/started", "item/completed"):
            item = obj(params.get("item"))
            if item.get("type") not in CONVERSATION_ITEMS:
                await self.feed.feed(raw)
        elif method in ("serverRequest/resolved", "item/fileChange/patchUpdated",
                        "mcpServer/startupStatus/updated"):
            await self.feed.feed(raw)
        # Everything else (answer deltas, thread status, token usage, …) is the child's own.
