"""What the scripted model answers: Responses-API stream events and whole responses.

Each item builder (``message``, ``shell_call``, ``apply_patch``, ``update_plan``,
``reasoning``, ``spawn_agent``, …) returns the SSE events of one output item, in the
shapes codex 0.171 reads from a Responses-API provider; ``turn`` wraps items into a
complete ``Response``, and ``hang``, ``cut``, ``stream_failure`` and ``http_error``
make the failures tests need.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

Event = dict[str, Any]
_ids = itertools.count(1)


def _next_id(prefix: str) -> str:
    return f"{prefix}_{next(_ids)}"


# ----------------------------------------------------------------------------- items


def message(text: str, chunks: Iterable[str] | None = None, *, item_id: str | None = None,
            phase: str | None = None) -> list[Event]:
    """An assistant message, streamed as ``chunks`` (default: one delta)."""
    item_id = item_id or _next_id("msg")
    pieces = list(chunks) if chunks is not None else [text]
    head: dict[str, Any] = {"type": "message", "role": "assistant", "id": item_id,
                            "content": [{"type": "output_text", "text": ""}]}
    done: dict[str, Any] = {**head, "content": [{"type": "output_text", "text": text}]}
    if phase:
        head["phase"] = done["phase"] = phase
    events: list[Event] = [{"type": "response.output_item.added", "item": head}]
    events += [{"type": "response.output_text.delta", "delta": p, "item_id": item_id} for p in pieces]
    events.append({"type": "response.output_item.done", "item": done})
    return events


def function_call(name: str, arguments: dict[str, Any] | str, call_id: str | None = None,
                  *, namespace: str | None = None) -> list[Event]:
    """A function tool call; ``namespace`` names the tool namespace (e.g. ``multi_agent_v1``)."""
    call_id = call_id or _next_id("call")
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    item: dict[str, Any] = {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id,
                            "name": name, "arguments": args}
    if namespace:
        item["namespace"] = namespace
    return [{"type": "response.output_item.done", "item": item}]


def spawn_agent(message_text: str, call_id: str | None = None) -> list[Event]:
    """The model spawns a sub-agent (the ``multi_agent_v1`` tools of an unknown model slug)."""
    return function_call("spawn_agent", {"message": message_text}, call_id, namespace="multi_agent_v1")


def wait_agent(agent_ids: list[str], call_id: str | None = None, timeout_ms: int = 60_000) -> list[Event]:
    return function_call("wait_agent", {"targets": agent_ids, "timeout_ms": timeout_ms}, call_id,
                         namespace="multi_agent_v1")


def shell_call(cmd: str, *, call_id: str | None = None, workdir: str | None = None,
               **extra: Any) -> list[Event]:
    """The model runs ``cmd`` through codex's ``exec_command`` tool.

    ``login`` defaults to False: a login shell sources the user's profile, which on a
    pyenv machine costs seconds per command and can stall a minute on pyenv's rehash
    lock when an earlier command was killed mid-rehash.
    """
    args: dict[str, Any] = {"cmd": cmd, "login": False, **extra}
    if workdir:
        args["workdir"] = workdir
    return function_call("exec_command", args, call_id)


def custom_tool_call(name: str, text: str, call_id: str | None = None) -> list[Event]:
    call_id = call_id or _next_id("call")
    item = {"type": "custom_tool_call", "call_id": call_id, "name": name, "input": ""}
    return [{"type": "response.output_item.added", "item": item},
            {"type": "response.output_item.done", "item": {**item, "input": text}}]


def apply_patch(patch: str, call_id: str | None = None) -> list[Event]:
    """A freeform ``apply_patch`` call (gpt-5.5's form); ``patch`` is the full envelope."""
    return custom_tool_call("apply_patch", patch, call_id)


def add_file_patch(path: str, lines: Iterable[str]) -> str:
    body = "".join(f"+{line}\n" for line in lines)
    return f"*** Begin Patch\n*** Add File: {path}\n{body}*** End Patch\n"


def update_plan(steps: Iterable[tuple[str, str]], explanation: str | None = None,
                call_id: str | None = None) -> list[Event]:
    """``steps`` are ``(text, status)`` with status pending / in_progress / completed."""
    args: dict[str, Any] = {"plan": [{"step": s, "status": st} for s, st in steps]}
    if explanation is not None:
        args["explanation"] = explanation
    return function_call("update_plan", args, call_id)


def reasoning(summary: Iterable[str], raw: Iterable[str] = (), item_id: str | None = None) -> list[Event]:
    item_id = item_id or _next_id("rs")
    summary, raw = list(summary), list(raw)
    events: list[Event] = [{"type": "response.output_item.added",
                            "item": {"type": "reasoning", "id": item_id, "summary": []}}]
    for index, text in enumerate(summary):
        events.append({"type": "response.reasoning_summary_part.added", "item_id": item_id,
                       "summary_index": index})
        events.append({"type": "response.reasoning_summary_text.delta", "delta": text,
                       "summary_index": index, "item_id": item_id})
    for text in raw:
        events.append({"type": "response.reasoning_text.delta", "delta": text,
                       "content_index": 0, "item_id": item_id})
    events.append({"type": "response.output_item.done", "item": {
        "type": "reasoning", "id": item_id,
        "summary": [{"type": "summary_text", "text": t} for t in summary],
        "content": [{"type": "reasoning_text", "text": "".join(raw)}] if raw else []}})
    return events


def web_search(query: str, item_id: str | None = None) -> list[Event]:
    item = {"type": "web_search_call", "id": item_id or _next_id("ws"), "status": "completed",
            "action": {"type": "search", "query": query}}
    return [{"type": "response.output_item.added", "item": item},
            {"type": "response.output_item.done", "item": item}]


# ------------------------------------------------------------------------- responses


@dataclass
class Response:
    """One answer to one model request."""

    events: list[Event] = field(default_factory=list)
    status: int = 200
    body: dict[str, Any] | None = None  # for a non-200 status
    headers: dict[str, str] = field(default_factory=dict)
    hang: bool = False  # after the events, block until released or the peer leaves
    complete: bool = True  # False: close the stream without response.completed
    delay_s: float = 0.0  # pause between events (a slow model)


USAGE = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
         "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}


def turn(*items: list[Event], usage: dict[str, Any] | None = None, delay_s: float = 0.0) -> Response:
    """A complete response carrying ``items`` (each a list from the item builders)."""
    rid = _next_id("resp")
    events: list[Event] = [{"type": "response.created", "response": {"id": rid}}]
    for item in items:
        events += item
    events.append({"type": "response.completed", "response": {"id": rid, "usage": usage or USAGE}})
    return Response(events=events, delay_s=delay_s)


def hang(*items: list[Event]) -> Response:
    """Stream ``items`` then block: for interrupt and steer tests."""
    response = turn(*items)
    response.events.pop()
    response.hang = True
    return response


def cut(*items: list[Event]) -> Response:
    """Stream ``items`` then close the connection before ``response.completed``."""
    response = turn(*items)
    response.events.pop()
    response.complete = False
    return response


def stream_failure(code: str = "server_error", message: str = "The model had an error") -> Response:
    rid = _next_id("resp")
    return Response(events=[{"type": "response.created", "response": {"id": rid}},
                            {"type": "response.failed",
                             "response": {"id": rid, "error": {"code": code, "message": message}}}])


def http_error(status: int, code: str = "server_error", message: str = "scripted failure",
               retry_after: int | None = None) -> Response:
    headers = {"retry-after": str(retry_after)} if retry_after is not None else {}
    return Response(status=status, headers=headers, body={
        "error": {"message": message, "type": code, "param": None, "code": code}})


def text_reply(text: str) -> Response:
    return turn(message(text))
