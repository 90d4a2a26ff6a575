"""Which MCP tool an approval is for, and what it says about its risk, on every codex.

From 0.169 codex puts the tool's name and MCP annotations in the approval's ``_meta``
(``tool_name``, ``tool_annotations``). Older releases (measured on 0.150 and 0.160) send
neither: the name is only in the message codex writes ("Allow the elicit MCP server to
run tool "ask_form"?"), and nothing says whether the tool is destructive. Then the
risk is unknown (``None``), which the caller must not read as "harmless".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any

from boss_agent.jsonshape import mapping

_NAMED_IN_MESSAGE = re.compile(r'\brun tool "([^"\n]{1,200})"')


@dataclass(frozen=True)
class ToolIdentity:
    name: str | None
    destructive: bool | None  # None: this codex does not say
    read_only: bool | None


def tool_identity(params: Mapping[str, Any]) -> ToolIdentity:
    """The tool of an ``mcpServer/elicitation/request`` that approves an MCP tool call."""
    meta = mapping(params.get("_meta"))
    if isinstance(meta.get("tool_name"), str):
        # A codex that names the tool passes its annotations on: none means none declared.
        hints = mapping(meta.get("tool_annotations"))
        return ToolIdentity(meta["tool_name"], bool(hints.get("destructiveHint")), bool(hints.get("readOnlyHint")))
    named = _NAMED_IN_MESSAGE.search(str(params.get("message") or ""))
    return ToolIdentity(named.group(1) if named else None, None, None)
