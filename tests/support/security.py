"""Shared set-up for the security regression tests: hostile tasks against real codex."""

from __future__ import annotations

from typing import Any

from boss_agent.tasks import Task, parse_task


def hostile(**fields: Any) -> Task:
    """A task as every source builds it: through ``parse_task`` from wire fields."""
    return parse_task({"taskId": "t-hostile", "prompt": "do it", **fields})
