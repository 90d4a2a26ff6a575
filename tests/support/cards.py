"""Progress cards in unit tests: codex messages in the shape it sends them, a card
reduced from them, and a card view drawn as the terminal shows it."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from boss_agent.cli.terminal_card import render_card
from boss_agent.progress.card import Card, new_card
from boss_agent.progress.reducer import reduce

WD = "/srv/work"


def run(*messages: dict[str, Any], card: Card | None = None) -> Card:
    card = card or new_card(workdir=WD, now="2026-11-30T00:00:00Z")
    for message in messages:
        card = reduce(card, message)
    return card


def note(method: str, **params: Any) -> dict[str, Any]:
    return {"method": method, "params": params, "emittedAtMs": 1795995745083}


def item(event: str, **fields: Any) -> dict[str, Any]:
    return note(f"item/{event}", item=fields, threadId="T", turnId="U")


def draw(view: dict[str, Any]) -> str:
    console = Console(width=100, record=True, color_system=None)
    console.print(render_card(view))
    return console.export_text()
