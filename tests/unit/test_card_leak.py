"""No message shape codex can send leaks through the card.

Instances of every ``ServerNotification`` and ``ServerRequest`` variant are generated
from the committed 0.171.0 JSON schema, with every union variant visited (so every
ThreadItem type goes through ``item/started`` and ``item/completed``). Every string field
gets a distinct canary:

* fields the card may show (labels, messages, plan text, paths) get a secret-shaped
  canary plus an absolute home and workdir path: only the masked / relative forms may
  come out;
* everything else (ids, commands, output, diffs, arguments, prompts, raw reasoning,
  queries, cwd, installation ids, SDP, audio) gets a plain canary that must not come
  out at all, masked or not.

So the test checks the allow-list, not only the sanitizer.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import pytest

from boss_agent.progress.card import new_card
from boss_agent.progress.reducer import reduce

SCHEMA_DIR = (Path(__file__).resolve().parents[2] / "docs" / "protocol-snapshots"
              / "codex-app-server" / "0.171.0" / "schema")
WORKDIR = "/srv/canary-workdir"
HOME = os.path.expanduser("~")
# A string under one of these keys (at any depth) must never reach the card.
NEVER_SHOWN = frozenset({
    "id", "threadId", "turnId", "itemId", "callId", "reviewId", "requestId", "sessionId",
    "realtimeSessionId", "environmentId", "processId", "processHandle", "approvalId",
    "senderThreadId", "receiverThreadIds", "agentThreadId", "agentsStates", "rootTurnId",
    "parentThreadId", "forkedFromId", "conversationId", "installationId", "loginId",
    "generationId", "fileId", "targetItemId", "sourceTurnId", "subscriptionId", "importId", "watchId",
    "command", "commandActions", "parsedCmd", "aggregatedOutput", "stdin", "stdout", "stderr",
    "deltaBase64", "diff", "arguments", "result", "contentItems", "content", "fragments",
    "output", "revisedPrompt", "prompt", "cwd", "sdp", "audio", "query", "queries", "url",
    "pattern", "results", "review", "questions", "proposedExecpolicyAmendment",
    "proposedNetworkPolicyAmendments", "availableDecisions", "settings", "developer_instructions",
    "sourcePath", "entries", "rationale", "authUrl", "writableRoots", "samplePaths",
    "changedPaths", "inputImages", "turns", "preview", "gitInfo", "memoryCitation",
    "additionalDetails", "misalignment", "metadata", "threadName", "readState", "run",
    "data", "files", "networkApprovalContext", "additionalPermissions", "permissions",
    "grantRoot", "details", "userAuthorization", "action", "appContext",
    "mcpAppUi", "mcpAppResourceUri", "notification", "itemTypeResults", "range", "extra",
    "credits", "individualLimit", "limitId", "limitName",
    "normalModelSlug", "text_elements", "delivery", "moderation", "failure", "scriptPath",
    "pluginId", "source", "codexErrorInfo",
})
# Deltas that are allowed on the card (answer, reasoning summary, realtime transcript).
ENUM_PICKS = 4  # most status enums have at most four values
SHOWN_DELTAS = frozenset({"item/agentMessage/delta", "item/reasoning/summaryTextDelta",
                          "thread/realtime/transcript/delta", "thread/realtime/item/transcript/delta"})


def _load(name: str) -> dict[str, Any]:
    return json.loads((SCHEMA_DIR / name).read_text())


class Planter:
    """Builds an instance of a schema, choosing union variant ``pick`` everywhere."""

    def __init__(self, definitions: dict[str, Any], pick: int, method: str, enum_pick: int = 0) -> None:
        self.definitions, self.pick, self.method = definitions, pick, method
        self.enum_pick = enum_pick  # apart from ``pick``, so every status meets every item type
        self.counter = itertools.count()
        self.plain: list[str] = []

    def string(self, hidden: bool) -> str:
        n = next(self.counter)
        if hidden:
            self.plain.append(f"PLAINCANARY{n}X")
            return f"PLAINCANARY{n}X"
        return (f"see sk-proj-CANARY{n}abcdefghijklmnop at {HOME}/HOMECANARY{n}/f.txt"
                f" and {WORKDIR}/WDCANARY{n}/g.py")

    def build(self, schema: Any, hidden: bool, depth: int = 0) -> Any:
        if not isinstance(schema, dict) or depth > 12:
            return {"x": self.string(hidden)} if schema is True else None
        if "$ref" in schema:
            return self.build(self.definitions[schema["$ref"].split("/")[-1]], hidden, depth + 1)
        for key in ("oneOf", "anyOf"):
            if key in schema:
                options = [o for o in schema[key] if o.get("type") != "null"] or schema[key]
                chosen = self.build(options[self.pick % len(options)], hidden, depth + 1)
                if "properties" in schema and isinstance(chosen, dict):
                    return {**self.object(schema, hidden, depth), **chosen}  # flattened variant
                return chosen
        if "allOf" in schema:
            merged: dict[str, Any] = {}
            for part in schema["allOf"]:
                value = self.build(part, hidden, depth + 1)
                merged.update(value if isinstance(value, dict) else {})
            return merged
        if "enum" in schema:
            return schema["enum"][self.enum_pick % len(schema["enum"])]
        if "const" in schema:
            return schema["const"]
        kind = schema.get("type")
        kind = next((k for k in kind if k != "null"), "null") if isinstance(kind, list) else kind
        if kind == "object" or "properties" in schema:
            return self.object(schema, hidden, depth)
        if kind == "array":
            return [self.build(schema.get("items", {}), hidden, depth + 1)]
        if kind == "string":
            return self.string(hidden)
        if kind in ("integer", "number"):
            return 7
        if kind == "boolean":
            return True
        return None

    def object(self, schema: dict[str, Any], hidden: bool, depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, sub in schema.get("properties", {}).items():
            hide = hidden or name in NEVER_SHOWN or (name == "delta" and self.method not in SHOWN_DELTAS)
            out[name] = self.build(sub, hide, depth + 1)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            out[self.string(hidden)] = self.build(extra, hidden, depth + 1)
        return out


def _variants(file: str) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    schema = _load(file)
    return [(v["properties"]["method"]["enum"][0], v, schema["definitions"]) for v in schema["oneOf"]]


def _cases() -> list[tuple[str, str, int]]:
    cases = []
    for file in ("ServerNotification.json", "ServerRequest.json"):
        for method, _variant, _defs in _variants(file):
            picks = 19 if method in ("item/started", "item/completed", "turn/completed") else 4
            cases += [(file, method, pick) for pick in range(picks)]
    return cases


def _planted(file: str, method: str, pick: int, enum_pick: int) -> tuple[dict[str, Any], list[str]]:
    (variant, definitions), = [(v, d) for m, v, d in _variants(file) if m == method]
    planter = Planter(definitions, pick, method, enum_pick)
    message: dict[str, Any] = {"method": method,
                               "params": planter.build(variant["properties"].get("params", {}), False)}
    if file == "ServerRequest.json":
        message["id"] = "PLAINCANARYREQUESTID"
        planter.plain.append("PLAINCANARYREQUESTID")
    return message, planter.plain


@pytest.mark.parametrize(("file", "method", "pick"), _cases())
def test_no_planted_canary_leaves_the_card_for_any_schema_shape(file: str, method: str, pick: int) -> None:
    for enum_pick in range(ENUM_PICKS):
        message, plain = _planted(file, method, pick, enum_pick)
        card = new_card(workdir=WORKDIR)
        # Twice: a second message of the same shape exercises the update paths.
        card = reduce(reduce(card, message), message)
        assert card.ignored_count == 0, "a schema-valid message was dropped as malformed"
        for end in ({"method": "turn/completed", "params": {"turn": {"status": "interrupted"}}},
                    {"method": "boss/finished", "params": {"status": "completed"}}):
            text = json.dumps(card.to_dict(), ensure_ascii=False) + repr(card)
            for canary in plain:
                assert canary not in text, f"{method}: a never-shown field reached the card"
            assert "CANARY" not in text.replace("HOMECANARY", "").replace("WDCANARY", "")
            assert HOME + "/" not in text and WORKDIR not in text
            card = reduce(card, end)


def test_the_generator_reaches_every_thread_item_type() -> None:
    (variant, definitions), = [(v, d) for m, v, d in _variants("ServerNotification.json")
                               if m == "item/started"]
    seen = {Planter(definitions, pick, "item/started").build(variant["properties"]["params"], False)
            ["item"]["type"] for pick in range(19)}
    assert len(seen) == 19
