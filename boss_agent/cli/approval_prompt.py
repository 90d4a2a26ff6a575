"""Answering an approval at the terminal (`boss-agent task`): every kind, one prompt each.

A command, file edit or permission request is a yes/no; Plan mode's questions are
asked one by one (a number picks an option, anything else is the free answer, a
secret question does not echo); an MCP form asks each field of its schema; a url
elicitation shows the address to open. An approval withdrawn while the person was
typing answers 409 ``approval_withdrawn``: that is reported, never an error.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from rich.console import Console
from rich.markup import escape

from boss_agent.controlplane import LocalClient
from boss_agent.errors import ControlPlaneError
from boss_agent.progress.approval_view import text_lines

logger = logging.getLogger(__name__)

YES = frozenset({"y", "yes"})
NO_LONGER_ASKED = ("approval_withdrawn", "approval_already_decided", "task_finished")


async def _input(console: Console, prompt: str, *, secret: bool = False) -> str:
    return (await asyncio.to_thread(console.input, prompt, password=secret)).strip()


def _facts(approval: dict[str, Any]) -> str:
    """What the approval asks, as the gateway form says it; rich markup in it is escaped."""
    lines = text_lines(approval)
    lines[0] = "Approve: " + lines[0]
    return "\n".join(escape(line) for line in lines)


async def _answers(console: Console, questions: list[dict[str, Any]]) -> dict[str, list[str]]:
    answers: dict[str, list[str]] = {}
    for question in questions:
        console.print(escape(f"{question.get('header') or 'Question'}: {question.get('question', '')}"))
        options = question.get("options") or []
        for number, option in enumerate(options, 1):
            console.print(escape(f"  {number}. {option.get('label', '')} {option.get('description', '')}"))
        text = await _input(console, "answer: ", secret=bool(question.get("secret")))
        if text.isdigit() and 1 <= int(text) <= len(options):
            text = options[int(text) - 1].get("label", "")
        if text:
            answers[str(question.get("id"))] = [text]
    return answers


async def _form(console: Console, schema: dict[str, Any]) -> dict[str, Any]:
    content: dict[str, Any] = {}
    for name, field in (schema.get("properties") or {}).items():
        field = field if isinstance(field, dict) else {}
        hint = f" ({'/'.join(field['enum'])})" if isinstance(field.get("enum"), list) else ""
        text = await _input(console, escape(f"{field.get('title') or name}{hint}: "))
        if field.get("type") == "boolean":
            content[name] = text.lower() in YES
        elif field.get("type") in ("number", "integer") and text:
            content[name] = float(text) if field["type"] == "number" else int(text)
        elif text:
            content[name] = text
    return content


async def _decision(console: Console, approval: dict[str, Any]) -> dict[str, Any]:
    """The local API body for the person's answer to ``approval``."""
    console.print(_facts(approval))
    if approval.get("kind") == "userInput" and approval.get("questions"):
        answers = await _answers(console, approval["questions"])
        return {"decision": {"answers": answers}} if answers else {"decision": "decline"}
    yes = (await _input(console, escape("[y/n] "))).lower() in YES  # rich reads a bare [y/n] as markup
    if not yes:
        return {"decision": "decline"}
    if approval.get("kind") == "elicitation" and isinstance(approval.get("schema"), dict):
        return {"decision": "accept", "content": await _form(console, approval["schema"])}
    return {"decision": "accept"}


async def ask(client: LocalClient, task_id: str, approval: dict[str, Any], console: Console) -> None:
    body = await _decision(console, approval)
    try:
        await client.decide(task_id, approval["approvalId"], body["decision"], content=body.get("content"))
    except ControlPlaneError as exc:
        if exc.code not in NO_LONGER_ASKED:
            raise
        console.print("That approval is no longer asked (Codex stopped waiting for it).")
