"""``reduce(card, message) -> card``: the pure, table-driven progress reducer.

No I/O, no clock, no exceptions for odd input: the I/O layer feeds it every wire
message from ``codex app-server`` and the runner's own ``boss/*`` lifecycle events.

``NOTIFICATIONS`` and ``REQUESTS`` name every method of codex's ``ServerNotification``
and ``ServerRequest`` lists (0.171.0); ``ITEMS`` (items.py) names every ThreadItem
type. Each entry is a handler or ``None`` (deliberately ignored), with the reason.
``tests/peers/codex/test_protocol_snapshot.py`` fails when the committed schema grows a method the
tables do not classify. At run time a method nobody knows (a newer codex) is ignored
and counted in ``card.ignored_count``, never an error.

Ordering facts this relies on (observed on codex 0.171.0): interrupt and steer leave
items open, so ``turn/completed`` closes them; ``serverRequest/resolved`` may arrive
after ``turn/completed``; retries show up as ``error`` with ``willRetry``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from boss_agent.errors import IllegalTransition
from boss_agent.lifecycles import NOT_YET_RUNNING, TaskStatus
from boss_agent.progress import boss_events

from boss_agent.progress import approval_card as approvals
from boss_agent.progress import notifications as n
from boss_agent.progress.answer import grow_answer
from boss_agent.progress.card import Card, Reasoning, Step, final_answer, key_of
from boss_agent.progress.exec_events import reduce_exec_event
from boss_agent.progress.items import ITEMS, add_changes, close_open_items, with_steps

__all__ = ["NOTIFICATIONS", "REQUESTS", "ITEMS", "reduce", "reduce_exec_event", "coverage", "final_answer"]

Handler = Callable[[Card, Mapping[str, Any]], Card]
MAX_UNKNOWN_NAMES = 20  # remember a few unknown method names for a debug log line
_STEP_STATUS = {"in_progress": "inProgress", "inProgress": "inProgress", "pending": "pending",
                "completed": "completed", "failed": "failed"}


# ------------------------------------------------------------------------- turn & items


def turn_started(card: Card, params: Mapping[str, Any]) -> Card:
    turn = params.get("turn") or {}
    status = TaskStatus.RUNNING if card.status in NOT_YET_RUNNING else card.status
    base = _fold_diff(card)
    return card.evolve(status=status, turn_key=key_of(turn.get("id")), diff_base=base,
                       startedAt=card.startedAt or card.updatedAt)


def _fold_diff(card: Card) -> tuple[int, int, int]:
    """A new turn: the branch counts so far become the base the next diff adds to."""
    if card.branch is None:
        return card.diff_base
    return (card.branch.changedFiles, card.branch.insertions, card.branch.deletions)


def turn_completed(card: Card, params: Mapping[str, Any]) -> Card:
    """Close what interrupt and steer left open; nobody will answer pending approvals."""
    turn = params.get("turn") or {}
    # An item still open when its turn ends never finished: a failed turn failed it,
    # anything else (interrupt, steer, a completed turn) cut it short.
    card = close_open_items(card, "failed" if turn.get("status") == "failed" else "interrupted")
    card = approvals.close_pending(card)
    return card.evolve(diff_base=_fold_diff(card), turn_key=None)


def _item(params: Mapping[str, Any]) -> tuple[Mapping[str, Any], Any]:
    item = params.get("item")
    if not isinstance(item, Mapping):
        return {}, None
    return item, ITEMS.get(str(item.get("type")), (None, ""))[0]


def item_started(card: Card, params: Mapping[str, Any]) -> Card:
    item, handler = _item(params)
    if handler is None:
        return card
    card = handler(card, item, False)
    return card.evolve(open_items=card.open_items + ((key_of(item.get("id")), str(item.get("type"))),))


def item_completed(card: Card, params: Mapping[str, Any]) -> Card:
    item, handler = _item(params)
    if handler is None:
        return card
    card = handler(card, item, True)
    key = key_of(item.get("id"))
    if any(k == key for k, _ in card.open_items):
        card = card.evolve(open_items=tuple(o for o in card.open_items if o[0] != key))
    return card


def agent_delta(card: Card, params: Mapping[str, Any]) -> Card:
    delta = params.get("delta")
    return card.streamed(grow_answer(card.answer, delta), delta, card.updatedAt) if isinstance(delta, str) else card


def summary_delta(card: Card, params: Mapping[str, Any]) -> Card:
    delta = params.get("delta")
    if not isinstance(delta, str):
        return card
    old = card.reasoningSummary
    return card.evolve(reasoningSummary=Reasoning((old.text if old else "") + delta, "inProgress"))


def summary_part(card: Card, params: Mapping[str, Any]) -> Card:
    old = card.reasoningSummary
    if old is None or not old.text or params.get("summaryIndex") in (0, None):
        return card.evolve(reasoningSummary=Reasoning("" if params.get("summaryIndex") in (0, None)
                                                      else (old.text if old else ""), "inProgress"))
    return card.evolve(reasoningSummary=Reasoning(old.text + "\n\n", "inProgress"))


def plan_updated(card: Card, params: Mapping[str, Any]) -> Card:
    plan = params.get("plan")
    if not isinstance(plan, list):
        return card
    steps = []
    for entry in plan:
        if isinstance(entry, Mapping) and isinstance(entry.get("step"), str):
            steps.append(Step(entry["step"], _STEP_STATUS.get(str(entry.get("status")), "pending")))
    return with_steps(card, steps)


def diff_updated(card: Card, params: Mapping[str, Any]) -> Card:
    """Count files and +/- lines of the turn's aggregate diff; the diff is not kept."""
    diff = params.get("diff")
    if not isinstance(diff, str):
        return card
    files = insertions = deletions = 0
    for line in diff.splitlines():
        if line.startswith("diff --git "):
            files += 1
        elif line.startswith("+") and not line.startswith("+++ "):
            insertions += 1
        elif line.startswith("-") and not line.startswith("--- "):
            deletions += 1
    base_files, base_ins, base_del = card.diff_base
    return boss_events.set_branch(card, changedFiles=base_files + files,
                                  insertions=base_ins + insertions, deletions=base_del + deletions)


def patch_updated(card: Card, params: Mapping[str, Any]) -> Card:
    return add_changes(card, params.get("changes") or (), key_of(params.get("itemId")))


def request(card: Card, message: Mapping[str, Any]) -> Card:
    return approvals.on_request(card, message)


def review(card: Card, params: Mapping[str, Any]) -> Card:
    return approvals.on_review(card, params)


def resolved(card: Card, params: Mapping[str, Any]) -> Card:
    return approvals.on_resolved(card, params)


# ------------------------------------------------------------------------------- tables

NOTIFICATIONS: dict[str, tuple[Handler | None, str]] = {
    "error": (n.error, "warnings (kind error, or retry when willRetry)"),
    "thread/started": (n.thread_started, "backgroundAgents for sub-agent threads"),
    "thread/status/changed": (n.thread_status, "threadStatus"),
    "thread/readState/changed": (None, "read receipts for other UIs"),
    "thread/archived": (None, "thread list bookkeeping"),
    "thread/deleted": (None, "thread list bookkeeping"),
    "thread/unarchived": (None, "thread list bookkeeping"),
    "thread/closed": (None, "connection bookkeeping"),
    "thread/reverted": (None, "history rollback; the turn's own events say what changed"),
    "skills/changed": (None, "skill catalogue, not task progress"),
    "thread/name/updated": (None, "the thread title may quote the prompt"),
    "thread/section/changed": (None, "UI grouping of threads"),
    "thread/attachment/updated": (None, "attachment ids"),
    "thread/goal/updated": (n.goal_updated, "threadGoal"),
    "thread/prediction/updated": (None, "speculative UI prediction"),
    "thread/goal/cleared": (n.goal_cleared, "threadGoal = null"),
    "thread/queue/changed": (None, "queued-input bookkeeping"),
    "project/changed": (None, "project catalogue"),
    "thread/project/updated": (None, "project ids"),
    "thread/environment/connected": (None, "environment ids"),
    "thread/environment/disconnected": (None, "environment ids"),
    "thread/settings/updated": (n.settings_updated, "threadSettings (labels, no cwd)"),
    "thread/tokenUsage/updated": (n.token_usage, "tokenUsage"),
    "turn/started": (turn_started, "status running"),
    "hook/started": (None, "hook runs carry source paths and entries"),
    "turn/completed": (turn_completed, "closes dangling items and approvals"),
    "hook/completed": (None, "hook runs carry source paths and entries"),
    "turn/diff/updated": (diff_updated, "branch counts (+/- lines), never the diff"),
    "turn/plan/updated": (plan_updated, "steps"),
    "item/started": (item_started, "per ThreadItem type, see ITEMS"),
    "item/autoApprovalReview/started": (review, "approvals (auto-review)"),
    "item/autoApprovalReview/completed": (review, "approvals (autoApproved/autoDenied)"),
    "autoApprovalReview/strictReviewRequired": (n.strict_review, "warnings"),
    "item/completed": (item_completed, "per ThreadItem type, see ITEMS"),
    "item/agentMessage/delta": (agent_delta, "answerPreview"),
    "item/plan/delta": (None, "the completed plan item carries the whole plan"),
    "command/exec/outputDelta": (None, "command output"),
    "process/outputDelta": (None, "process output"),
    "thread/search/partial": (None, "search results of another request"),
    "process/exited": (None, "process output and exit of a client-run process"),
    "item/commandExecution/outputDelta": (None, "command output"),
    "item/commandExecution/terminalInteraction": (None, "stdin sent to a command"),
    "item/fileChange/outputDelta": (None, "patch tool output"),
    "item/fileChange/patchUpdated": (patch_updated, "fileChanges (paths and kinds, no diff)"),
    "serverRequest/resolved": (resolved, "approvals (also after turn/completed)"),
    "item/mcpToolCall/progress": (None, "free-form tool progress text"),
    "mcpServer/oauthLogin/completed": (n.mcp_oauth, "mcpServers"),
    "mcpServer/startupStatus/updated": (n.mcp_status, "mcpServers"),
    "mcpServer/event/stream/notification": (None, "raw MCP notifications"),
    "account/updated": (n.account_updated, "accountStatus.planType"),
    "account/gatewayOAuth/changed": (None, "login URLs"),
    "account/rateLimits/updated": (n.rate_limits, "accountStatus"),
    "app/list/updated": (None, "app catalogue"),
    "remoteControl/status/changed": (n.remote_control, "remoteControl (never installationId)"),
    "externalAgentConfig/import/progress": (None, "config import, not task progress"),
    "externalAgentConfig/import/completed": (None, "config import, not task progress"),
    "fs/changed": (None, "watched absolute paths"),
    "item/reasoning/summaryTextDelta": (summary_delta, "reasoningSummary"),
    "item/reasoning/summaryPartAdded": (summary_part, "reasoningSummary"),
    "item/reasoning/textDelta": (None, "raw reasoning"),
    "thread/compacted": (n.compacted, "compaction"),
    "model/rerouted": (n.model_rerouted, "modelRoute"),
    "model/verification": (n.model_verification, "modelVerification"),
    "modelProvider/authRecoveryStarted": (n.auth_recovery, "warnings"),
    "modelProvider/authRecoveryCompleted": (None, "recovery done; the warning stays as history"),
    "turn/moderationMetadata": (None, "opaque moderation metadata"),
    "model/safetyBuffering/updated": (None, "UI buffering hint"),
    "warning": (n.warning, "warnings"),
    "guardianWarning": (n.guardian_warning, "warnings"),
    "deprecationNotice": (n.deprecation, "warnings"),
    "configWarning": (n.config_warning, "warnings (summary only, no config path)"),
    "fuzzyFileSearch/sessionUpdated": (None, "file search of another request"),
    "fuzzyFileSearch/sessionCompleted": (None, "file search of another request"),
    "thread/realtime/started": (n.realtime_started, "realtime"),
    "thread/realtime/itemAdded": (None, "raw realtime item"),
    "thread/realtime/item/started": (None, "raw realtime item"),
    "thread/realtime/item/transcript/delta": (n.realtime_transcript, "realtime transcript"),
    "thread/realtime/item/completed": (None, "raw realtime item"),
    "thread/realtime/transcript/delta": (n.realtime_transcript, "realtime transcript"),
    "thread/realtime/transcript/done": (n.realtime_transcript_done, "realtime transcript"),
    "thread/realtime/outputAudio/delta": (n.realtime_audio, "realtime audioChunks (count only)"),
    "thread/realtime/sdp": (None, "SDP never leaves the device"),
    "thread/realtime/error": (n.realtime_error, "realtime"),
    "thread/realtime/closed": (n.realtime_closed, "realtime"),
    "windows/worldWritableWarning": (n.world_writable, "warnings (a count, no paths)"),
    "windowsSandbox/setupCompleted": (n.windows_sandbox, "warnings when it failed"),
    "account/login/completed": (None, "login flow of another client"),
}

RequestHandler = Callable[[Card, Mapping[str, Any]], Card]
REQUESTS: dict[str, tuple[RequestHandler | None, str]] = {
    "item/commandExecution/requestApproval": (request, "approvals (command)"),
    "item/fileChange/requestApproval": (request, "approvals (fileChange)"),
    "item/tool/requestUserInput": (request, "approvals (userInput), status waitingInput"),
    "mcpServer/elicitation/request": (request, "approvals (userInput)"),
    "item/permissions/requestApproval": (request, "approvals (permissions)"),
    "item/tool/call": (None, "the dynamicToolCall item is on the card; arguments are not"),
    "account/chatgptAuthTokens/refresh": (None, "auth plumbing"),
    "attestation/generate": (None, "auth plumbing"),
    "currentTime/read": (None, "the runner answers with the clock (codex 0.150 … 0.169 only)"),
    "applyPatchApproval": (request, "approvals (fileChange, v1 shape)"),
    "execCommandApproval": (request, "approvals (command, v1 shape)"),
}


def _at(message: Mapping[str, Any], card: Card) -> Any:
    at = message.get("emittedAtMs")
    return at if type(at) is int else card.updatedAt


def _unknown(card: Card, method: Any) -> Card:
    names = card.unknown_methods
    if isinstance(method, str) and method not in names and len(names) < MAX_UNKNOWN_NAMES:
        names = names + (method,)
    return card.evolve(ignored_count=card.ignored_count + 1, unknown_methods=names)


def reduce(card: Card, message: dict[str, Any]) -> Card:
    """The next card after one wire message (notification, server request or boss event)."""
    if type(message) is not dict and not isinstance(message, Mapping):
        return _unknown(card, None)
    method = message.get("method")
    params = message.get("params")
    if type(params) is not dict:
        params = params if isinstance(params, Mapping) else {}
    if method == "item/agentMessage/delta":
        # The hot path: nine in ten messages of a task are answer deltas (bench_card.py).
        delta = params.get("delta")
        if type(delta) is str:
            at = message.get("emittedAtMs")
            return card.streamed(grow_answer(card.answer, delta), delta, at if type(at) is int else card.updatedAt)
    if type(method) is not str:
        return card  # a response to one of our requests: nothing for the card
    try:
        return _dispatch(card, method, message, params)
    except AttributeError as exc:
        if isinstance(exc.obj, Card):
            raise  # a misspelt card field in our own handler: a bug, loudly
        return _unknown(card, None)  # a shape codex did not promise (see below)
    except (TypeError, ValueError, KeyError, IndexError):
        # A shape codex did not promise: that one message is dropped, never the card.
        return _unknown(card, None)
    except IllegalTransition:
        if method.startswith("boss/"):
            raise  # the runner's own event moved the task where it cannot go: a bug, loudly
        # Codex's messages arrive in codex's order (a late request after the turn ended):
        # one that would move the task backwards is dropped, never the card.
        return _unknown(card, None)


def _dispatch(card: Card, method: str, message: Mapping[str, Any], params: Mapping[str, Any]) -> Card:
    if method.startswith("boss/"):
        return boss_events.reduce_boss(card, method, params)
    is_request = "id" in message
    entry = (REQUESTS if is_request else NOTIFICATIONS).get(method)
    if entry is None:
        return _unknown(card, method)
    handler = entry[0]
    if handler is None:
        return card
    return handler(card.evolve(updatedAt=_at(message, card)), message if is_request else params)


def coverage() -> dict[str, dict[str, dict[str, str]]]:
    """The tables as data, for ``coverage.json`` of the protocol snapshot."""
    def table(entries: Mapping[str, tuple[Any, str]]) -> dict[str, dict[str, str]]:
        return {name: {"handling": "mapped" if handler else "ignored", "note": note}
                for name, (handler, note) in sorted(entries.items())}
    return {"serverNotifications": table(NOTIFICATIONS), "serverRequests": table(REQUESTS),
            "threadItems": table(ITEMS)}
