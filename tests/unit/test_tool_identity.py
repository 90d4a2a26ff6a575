"""An MCP tool approval names its tool and rates its risk on every supported codex.

The shapes are the ones the real binaries send for the elicit fixture's tool
(tests/peers/codex/test_approvals_kinds.py prints them): 0.171.0 names the tool in
``_meta``; 0.150.0 only in its message, and says nothing about the tool's risk.
"""

from __future__ import annotations

from typing import Any

from boss_agent.progress.approval_view import build
from boss_agent.progress.tool_identity import ToolIdentity, tool_identity

ELICITATION = "mcpServer/elicitation/request"
V150 = {"serverName": "cua", "mode": "form", "message": 'Allow the cua MCP server to run tool "click"?',
        "_meta": {"codex_approval_kind": "mcp_tool_call", "persist": ["session", "always"],
                  "tool_description": "Click.", "tool_params": {}, "tool_params_display": []},
        "requestedSchema": {"type": "object", "properties": {}}}


def _v171(**annotations: Any) -> dict[str, Any]:
    meta = {**V150["_meta"], "tool_name": "click"}
    if annotations:
        meta["tool_annotations"] = annotations
    return {**V150, "_meta": meta}


def test_a_codex_that_names_the_tool_in_meta_gives_its_name_and_annotations() -> None:
    assert tool_identity(_v171(destructiveHint=True)) == ToolIdentity("click", True, False)
    assert tool_identity(_v171()) == ToolIdentity("click", False, False)


def test_an_older_codex_gives_the_name_from_its_message_and_no_risk() -> None:
    assert tool_identity(V150) == ToolIdentity("click", None, None)
    assert tool_identity({**V150, "message": "Allow it?"}) == ToolIdentity(None, None, None)


def _shown(params: dict[str, Any]) -> tuple[str, str, str]:
    view = build(ELICITATION, params, workdir="/w")
    return view.kind, view.summary, view.risk


def test_a_tool_whose_risk_codex_does_not_say_is_high_and_is_named() -> None:
    assert _shown(V150) == ("tool", "Use the cua tool click", "high")
    assert _shown(_v171(destructiveHint=True))[2] == "high"
    assert _shown(_v171(readOnlyHint=True))[2] == "medium"  # an MCP server runs outside the sandbox
