"""Thread-, account- and model-level notifications onto the card.

Each handler is ``(card, params) -> card`` and copies only the allow-listed values of
docs/progress-card.md: states, labels, counts. Things the card must never hold are
not read at all: ``installationId``, thread-settings ``cwd``, realtime SDP and audio,
raw realtime items, config file paths, compaction turn ids.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from boss_agent.jsonshape import mapping
from boss_agent.progress.card import (
    TRANSCRIPT_WINDOW_CHARS,
    Account,
    BackgroundAgent,
    Card,
    Goal,
    McpServer,
    Notice,
    Realtime,
    Route,
    Settings,
    ThreadStatus,
    TokenUsage,
    Verification,
    key_of,
)
from boss_agent.progress.items import MAX_ACTIVITIES, count_compaction, put_agent
from boss_agent.timefmt import utc_iso

MAX_WARNINGS = 20  # the card shows recent warnings; a retry storm must not grow it forever


def epoch_iso(seconds: Any) -> str | None:
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool):
        return None
    return utc_iso(seconds)


def add_warning(card: Card, kind: str, message: Any) -> Card:
    if not isinstance(message, str) or not message.strip():
        return card
    record = Notice(kind, message)
    if record in card.warnings:
        return card
    return card.evolve(warnings=(card.warnings + (record,))[-MAX_WARNINGS:])


def thread_status(card: Card, params: Mapping[str, Any]) -> Card:
    status = params.get("status") or {}
    flags = status.get("activeFlags") or () if isinstance(status, Mapping) else ()
    state = status.get("type") if isinstance(status, Mapping) else None
    return card.evolve(threadStatus=ThreadStatus(
        str(state or "idle"), "waitingOnApproval" in flags, "waitingOnUserInput" in flags))


def thread_started(card: Card, params: Mapping[str, Any]) -> Card:
    """Only sub-agent threads are shown, as background agents; never their ids."""
    thread = params.get("thread") or {}
    if not isinstance(thread, Mapping) or not (thread.get("parentThreadId")
                                               or thread.get("agentNickname") or thread.get("agentRole")):
        return card
    name = str(thread.get("agentNickname") or thread.get("agentRole") or "sub-agent")
    source = thread.get("source")
    source = source if isinstance(source, str) else (
        next(iter(source), "subAgent") if isinstance(source, Mapping) else "subAgent")
    key = key_of(("agent", thread.get("id")))
    return put_agent(card, key, BackgroundAgent(key, name, "running", str(source)))


def goal_updated(card: Card, params: Mapping[str, Any]) -> Card:
    goal = params.get("goal") or {}
    return card.evolve(threadGoal=Goal(str(goal.get("objective") or ""), str(goal.get("status") or "active")))


def goal_cleared(card: Card, params: Mapping[str, Any]) -> Card:
    return card.evolve(threadGoal=None)


def _label(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return str(value.get("type") or value.get("mode") or next(iter(value), "custom"))
    return None


# codex's sandboxPolicy types in the task's own words, as boss/limits names them.
SANDBOX_LABELS = {"readOnly": "read-only", "workspaceWrite": "workspace-write",
                  "dangerFullAccess": "danger-full-access", "externalSandbox": "external-sandbox"}


def _sandbox_label(value: Any) -> str | None:
    label = _label(value)
    return SANDBOX_LABELS.get(label, label) if label else None


def settings_updated(card: Card, params: Mapping[str, Any]) -> Card:
    """Labels only: no cwd, no writable roots, no developer instructions."""
    s = params.get("threadSettings") or {}
    mode = s.get("collaborationMode")
    return card.evolve(threadSettings=Settings(
        _label(s.get("model")), _label(s.get("modelProvider")), _label(s.get("approvalPolicy")),
        _sandbox_label(s.get("sandboxPolicy")), _label(mode.get("mode")) if isinstance(mode, Mapping) else None,
        _label(s.get("effort"))))


def compacted(card: Card, params: Mapping[str, Any]) -> Card:
    return count_compaction(card, key_of(params.get("turnId")))


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def token_usage(card: Card, params: Mapping[str, Any]) -> Card:
    usage = params.get("tokenUsage") or {}
    total = usage.get("total") or {}
    window = usage.get("modelContextWindow")
    return card.evolve(tokenUsage=TokenUsage(
        _int(total.get("inputTokens")), _int(total.get("cachedInputTokens")),
        _int(total.get("outputTokens")), _int(total.get("reasoningOutputTokens")),
        _int(total.get("totalTokens")), window if isinstance(window, int) else None))


def account_updated(card: Card, params: Mapping[str, Any]) -> Card:
    old = card.accountStatus or Account()
    plan = params.get("planType")
    return card.evolve(accountStatus=Account(plan if isinstance(plan, str) else old.planType,
                                             old.rateLimited, old.primaryUsedPercent, old.resetsAt))


def rate_limits(card: Card, params: Mapping[str, Any]) -> Card:
    limits = params.get("rateLimits") or {}
    primary = mapping(limits.get("primary"))
    used = primary.get("usedPercent")
    used = used if isinstance(used, (int, float)) and not isinstance(used, bool) else None
    limited = bool(limits.get("rateLimitReachedType")) or (used is not None and used >= 100)
    old = card.accountStatus or Account()
    plan = limits.get("planType")
    return card.evolve(accountStatus=Account(plan if isinstance(plan, str) else old.planType,
                                             limited, used, epoch_iso(primary.get("resetsAt"))))


def model_verification(card: Card, params: Mapping[str, Any]) -> Card:
    checks = [v for v in params.get("verifications") or () if isinstance(v, str)]
    return card.evolve(modelVerification=Verification("required", ", ".join(checks) or "verification"))


def model_rerouted(card: Card, params: Mapping[str, Any]) -> Card:
    return card.evolve(modelRoute=Route(str(params.get("fromModel") or "?"),
                                        str(params.get("toModel") or "?"), _label(params.get("reason"))))


def mcp_status(card: Card, params: Mapping[str, Any]) -> Card:
    name = str(params.get("name") or "mcp")
    error = params.get("error") if isinstance(params.get("error"), str) else None
    record = McpServer(name, str(params.get("status") or "unknown"), error)
    servers = tuple(s for s in card.mcpServers if s.name != name) + (record,)
    return card.evolve(mcpServers=servers[-MAX_ACTIVITIES:])


def mcp_oauth(card: Card, params: Mapping[str, Any]) -> Card:
    ok = bool(params.get("success"))
    error = None if ok else (params.get("error") if isinstance(params.get("error"), str) else "login failed")
    return mcp_status(card, {"name": params.get("name"), "error": error,
                             "status": "authenticated" if ok else "authFailed"})


def remote_control(card: Card, params: Mapping[str, Any]) -> Card:
    return card.evolve(remoteControl=str(params.get("status") or "unknown"))


def _realtime(card: Card) -> Realtime:
    return card.realtime or Realtime("started")


def _rt(card: Card, **changes: Any) -> Card:
    old = _realtime(card)
    values = {name: getattr(old, name) for name in old.__slots__}
    values.update(changes)
    return card.evolve(realtime=Realtime(**values))


def realtime_started(card: Card, params: Mapping[str, Any]) -> Card:
    return card.evolve(realtime=Realtime("started"))


def realtime_transcript(card: Card, params: Mapping[str, Any]) -> Card:
    old = _realtime(card)
    delta = params.get("delta")
    text = delta if isinstance(delta, str) else ""
    # Raw and with context before the shown tail: masked, then cut, when serialized.
    window = (old.transcriptPreview + text)[-TRANSCRIPT_WINDOW_CHARS:]
    return _rt(card, transcriptPreview=window, transcriptChunks=old.transcriptChunks + 1, streaming=True)


def realtime_transcript_done(card: Card, params: Mapping[str, Any]) -> Card:
    done = params.get("text")
    text = done if isinstance(done, str) else ""
    return _rt(card, transcriptPreview=text[-TRANSCRIPT_WINDOW_CHARS:], streaming=False)


def realtime_audio(card: Card, params: Mapping[str, Any]) -> Card:
    """Counted, never stored: the audio data itself stays on the device."""
    return _rt(card, audioChunks=_realtime(card).audioChunks + 1)


def realtime_error(card: Card, params: Mapping[str, Any]) -> Card:
    return _rt(card, state="error", error=str(params.get("message") or "error"), streaming=False)


def realtime_closed(card: Card, params: Mapping[str, Any]) -> Card:
    reason = params.get("reason") if isinstance(params.get("reason"), str) else None
    return _rt(card, state="closed", closeReason=reason, streaming=False)  # nothing more arrives


def warning(card: Card, params: Mapping[str, Any]) -> Card:
    return add_warning(card, "warning", params.get("message"))


def guardian_warning(card: Card, params: Mapping[str, Any]) -> Card:
    return add_warning(card, "guardian", params.get("message"))


def config_warning(card: Card, params: Mapping[str, Any]) -> Card:
    """The summary only: ``path`` and ``details`` point into the user's config files."""
    return add_warning(card, "config", params.get("summary"))


def deprecation(card: Card, params: Mapping[str, Any]) -> Card:
    return add_warning(card, "deprecation", params.get("summary"))


def error(card: Card, params: Mapping[str, Any]) -> Card:
    err = mapping(params.get("error"))
    return add_warning(card, "retry" if params.get("willRetry") else "error", err.get("message"))


def auth_recovery(card: Card, params: Mapping[str, Any]) -> Card:
    return add_warning(card, "authRecovery", params.get("message"))


def strict_review(card: Card, params: Mapping[str, Any]) -> Card:
    return add_warning(card, "guardian", "strict review of approvals is required")


def world_writable(card: Card, params: Mapping[str, Any]) -> Card:
    """A count, not the sample paths."""
    count = len(params.get("samplePaths") or ()) + _int(params.get("extraCount"))
    return add_warning(card, "sandbox", f"{count} world-writable location(s) weaken the sandbox")


def windows_sandbox(card: Card, params: Mapping[str, Any]) -> Card:
    if params.get("success"):
        return card
    return add_warning(card, "sandbox", "Windows sandbox setup failed")
