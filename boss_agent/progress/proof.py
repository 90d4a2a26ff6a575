"""How each method the card maps is proven: on real codex, or synthetic only and why.

``coverage.json`` of the protocol snapshot carries this beside each mapped method, so
"mapped" never silently means "a handler exists that no real message ever reached".
A ``REAL`` entry names the test module that drives the real ``codex app-server``
(0.171) into sending it and checks what reaches the card or the person; a
``SYNTHETIC`` entry says why no offline run of codex can send it, so only
hand-built messages (the reducer and leak tests) exercise it.
``tests/unit/test_approvals_proof.py`` keeps the table complete and the named tests real.
"""

from __future__ import annotations

REAL = "realCodex"
SYNTHETIC = "synthetic"

_TRANSCRIPTS = "tests/peers/codex/test_card_transcripts.py"
_KINDS = "tests/peers/codex/test_approvals_kinds.py"
_SUBAGENTS = "tests/peers/codex/test_approvals_subagents.py"
_ACCOUNT = "needs a signed-in ChatGPT account; the offline scripted provider has none"
_GUARDIAN = "the guardian auto-reviewer is an account feature; not reachable offline"
_REALTIME = "needs an OpenAI realtime voice session"
_WINDOWS = "Windows only"

# method or item type -> (how, evidence: a test module for REAL, the reason for SYNTHETIC)
PROOF: dict[str, tuple[str, str]] = {
    # ---- server notifications
    "account/rateLimits/updated": (REAL, "tests/peers/codex/test_approvals_routing.py"),
    "account/updated": (SYNTHETIC, _ACCOUNT),
    "autoApprovalReview/strictReviewRequired": (SYNTHETIC, _GUARDIAN),
    "configWarning": (SYNTHETIC, "0.171 reports an unknown config key as `warning` at the first turn;"
                                 " no offline config produced configWarning"),
    "deprecationNotice": (SYNTHETIC, "sent for deprecated client calls (thread/fork hydration,"
                                     " includeTurns) that the daemon never makes"),
    "error": (REAL, _TRANSCRIPTS),
    "guardianWarning": (SYNTHETIC, _GUARDIAN),
    "item/agentMessage/delta": (REAL, _TRANSCRIPTS),
    "item/autoApprovalReview/completed": (SYNTHETIC, _GUARDIAN),
    "item/autoApprovalReview/started": (SYNTHETIC, _GUARDIAN),
    "item/completed": (REAL, _TRANSCRIPTS),
    "item/fileChange/patchUpdated": (REAL, _TRANSCRIPTS),
    "item/reasoning/summaryPartAdded": (REAL, _TRANSCRIPTS),
    "item/reasoning/summaryTextDelta": (REAL, _TRANSCRIPTS),
    "item/started": (REAL, _TRANSCRIPTS),
    "mcpServer/oauthLogin/completed": (SYNTHETIC, "needs an MCP server behind OAuth and a browser login"),
    "mcpServer/startupStatus/updated": (REAL, "tests/peers/desktop/test_runner_cua.py"),
    "model/rerouted": (SYNTHETIC, "OpenAI's servers reroute models; a custom provider never does"),
    "model/verification": (SYNTHETIC, _ACCOUNT),
    "modelProvider/authRecoveryStarted": (SYNTHETIC, "OpenAI auth recovery; the scripted provider has no auth"),
    "remoteControl/status/changed": (SYNTHETIC, "sent once when a connection opens, before any task"
                                                " listens; a later change needs ChatGPT remote control"),
    "serverRequest/resolved": (REAL, _TRANSCRIPTS),
    "thread/compacted": (SYNTHETIC, "0.171 reports compaction as the contextCompaction item"
                                    " (proven); this legacy notification was not seen"),
    "thread/goal/cleared": (SYNTHETIC, "goals are cleared by goal tools no test drives yet"),
    "thread/goal/updated": (SYNTHETIC, "goals are set by goal tools no test drives yet"),
    "thread/realtime/closed": (SYNTHETIC, _REALTIME),
    "thread/realtime/error": (SYNTHETIC, _REALTIME),
    "thread/realtime/item/transcript/delta": (SYNTHETIC, _REALTIME),
    "thread/realtime/outputAudio/delta": (SYNTHETIC, _REALTIME),
    "thread/realtime/started": (SYNTHETIC, _REALTIME),
    "thread/realtime/transcript/delta": (SYNTHETIC, _REALTIME),
    "thread/realtime/transcript/done": (SYNTHETIC, _REALTIME),
    "thread/settings/updated": (REAL, _TRANSCRIPTS),
    "thread/started": (SYNTHETIC, "0.171 announces a multi_agent_v1 sub-agent through the parent's"
                                  " collabAgentToolCall and the child's turns (proven in"
                                  " test_approvals_subagents.py), not a thread/started with parentThreadId"),
    "thread/status/changed": (REAL, _TRANSCRIPTS),
    "thread/tokenUsage/updated": (REAL, _TRANSCRIPTS),
    "turn/completed": (REAL, _TRANSCRIPTS),
    "turn/diff/updated": (REAL, _TRANSCRIPTS),
    "turn/plan/updated": (REAL, _TRANSCRIPTS),
    "turn/started": (REAL, _TRANSCRIPTS),
    "warning": (REAL, _SUBAGENTS),
    "windows/worldWritableWarning": (SYNTHETIC, _WINDOWS),
    "windowsSandbox/setupCompleted": (SYNTHETIC, _WINDOWS),
    # ---- server requests
    "applyPatchApproval": (SYNTHETIC, "the v1 shape; 0.171 sends item/fileChange/requestApproval to v2 clients"),
    "execCommandApproval": (SYNTHETIC, "the v1 shape; 0.171 sends item/commandExecution/requestApproval"
                                       " to v2 clients"),
    "item/commandExecution/requestApproval": (REAL, _TRANSCRIPTS),
    "item/fileChange/requestApproval": (REAL, _TRANSCRIPTS),
    "item/permissions/requestApproval": (REAL, _KINDS),
    "item/tool/requestUserInput": (REAL, _KINDS),
    "mcpServer/elicitation/request": (REAL, _KINDS),
    # ---- thread items
    "agentMessage": (REAL, _TRANSCRIPTS),
    "collabAgentToolCall": (REAL, _SUBAGENTS),
    "commandExecution": (REAL, _TRANSCRIPTS),
    "contextCompaction": (REAL, _TRANSCRIPTS),
    "dynamicToolCall": (SYNTHETIC, "the daemon registers no dynamic tools, so codex never calls one for a task"),
    "enteredReviewMode": (SYNTHETIC, "review/start is a client request the daemon never sends"),
    "exitedReviewMode": (SYNTHETIC, "review/start is a client request the daemon never sends"),
    "fileChange": (REAL, _TRANSCRIPTS),
    "imageGeneration": (SYNTHETIC, "image generation runs on OpenAI's side; the scripted provider has none"),
    "imageView": (SYNTHETIC, "view_image is offered, but no test drives it yet"),
    "mcpToolCall": (REAL, _KINDS),
    "plan": (REAL, _TRANSCRIPTS),
    "reasoning": (REAL, _TRANSCRIPTS),
    "sleep": (SYNTHETIC, "no tool of 0.171's offline surface produces it"),
    "subAgentActivity": (SYNTHETIC, "0.171's multi_agent_v1 spawns report as collabAgentToolCall"),
    "webSearch": (REAL, _TRANSCRIPTS),
}


def proof_of(name: str) -> dict[str, str] | None:
    entry = PROOF.get(name)
    if entry is None:
        return None
    how, evidence = entry
    return {"proven": how, "test" if how == REAL else "reason": evidence}
