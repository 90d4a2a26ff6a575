"""Approvals on the card: a safe description of each codex request, and its life.

``describe_approval`` turns a codex approval / user-input server request into
``(kind, summary, risk)``: the summary says what is asked ("Run a command (network: no)",
"Edit 2 files: a.py, b.txt"), never the command text, the diff or the question text. A
command is named by its program only (the basename of its first word, e.g. "Run pytest"):
never its arguments, never an environment assignment in front of it.

One codex request is one card entry. Entries are keyed by the hashed server request id
and the hashed item id, so an auto-review of an item, the user's request for the same
item and the runner's ``boss/approval`` echo all land on the same entry.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable, Mapping
from typing import Any

from boss_agent.jsonshape import mapping
from boss_agent.lifecycles import TERMINAL, TaskStatus
from boss_agent.progress.bounds import MAX_APPROVALS, trim
from boss_agent.progress.card import Approval, Card, key_of
from boss_agent.redact import sanitize_text

SUMMARY_FILES = 3  # name at most this many files in a summary; the rest is "+N more"
READ_ONLY_ACTIONS = frozenset({"read", "listFiles", "search"})
SHELLS = frozenset({"bash", "sh", "zsh", "dash", "fish"})  # `bash -lc "<script>"` names the script's program
# Program names are short lowercase words (pytest, git, python3.12, g++); a first word
# with capitals or odd characters looks more like a token or a path than a program.
PROGRAM_NAME = re.compile(r"[a-z0-9][a-z0-9._+-]{0,39}")
INPUT_KINDS = ("userInput", "elicitation")  # the person answers these; they wait on input

APPROVAL_REQUESTS = {
    "item/commandExecution/requestApproval": "command",
    "execCommandApproval": "command",  # v1 shape, still in ServerRequest
    "item/fileChange/requestApproval": "fileChange",
    "applyPatchApproval": "fileChange",  # v1 shape
    "item/permissions/requestApproval": "permissions",
    "item/tool/requestUserInput": "userInput",
    "mcpServer/elicitation/request": "elicitation",
}
_REVIEW_STATUS = {"inProgress": "pending", "approved": "autoApproved", "denied": "autoDenied",
                  "timedOut": "cancelled", "aborted": "cancelled"}
_REVIEW_KIND = {"command": "command", "execve": "command", "writeStdin": "command",
                "applyPatch": "fileChange", "networkAccess": "permissions",
                "mcpToolCall": "permissions", "requestPermissions": "permissions"}
_RISK = {"low": "low", "medium": "medium", "high": "high", "critical": "high"}


def _files_label(files: list[str]) -> str:
    names = ", ".join(files[:SUMMARY_FILES])
    more = f" +{len(files) - SUMMARY_FILES} more" if len(files) > SUMMARY_FILES else ""
    noun = "file" if len(files) == 1 else "files"
    return f"Edit {len(files)} {noun}: {names}{more}"


def _relative(path: str, workdir: str | None) -> str:
    if workdir and os.path.isabs(path):
        rel = os.path.relpath(path, workdir)
        return rel if not rel.startswith("..") else os.path.basename(path)
    return path


def _network_requested(params: Mapping[str, Any]) -> bool:
    if params.get("networkApprovalContext"):
        return True
    extra = params.get("additionalPermissions") or params.get("permissions") or {}
    network = extra.get("network") if isinstance(extra, Mapping) else None
    return bool(isinstance(network, Mapping) and network.get("enabled"))


def _words(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:  # unbalanced quotes: the plain split still finds the first word
        return text.split()


def program_name(params: Mapping[str, Any]) -> str | None:
    """The program a command runs (basename of its first word), or None when unsure."""
    actions = params.get("commandActions") or params.get("parsedCmd") or []
    first = actions[0] if actions and isinstance(actions[0], Mapping) else {}
    command = first.get("command") if isinstance(first.get("command"), str) else params.get("command")
    words = command if isinstance(command, list) else _words(command) if isinstance(command, str) else []
    words = [w for w in words if isinstance(w, str)]
    if len(words) >= 3 and os.path.basename(words[0]) in SHELLS and words[1].startswith("-") \
            and "c" in words[1]:
        words = _words(words[2])
    words = [w for w in words if "=" not in w]  # FOO=bar before the program may carry a secret
    if not words:
        return None
    name = os.path.basename(words[0])
    if not PROGRAM_NAME.fullmatch(name) or sanitize_text(name, limit=40) != name:
        return None
    return name


def _command(params: Mapping[str, Any]) -> tuple[str, str]:
    network = _network_requested(params)
    actions = params.get("commandActions") or params.get("parsedCmd") or []
    kinds = {a.get("type") for a in actions if isinstance(a, Mapping)}
    risk = "high" if network or params.get("additionalPermissions") else (
        "low" if kinds and kinds <= READ_ONLY_ACTIONS else "medium")
    program = program_name(params)
    return f"Run {program or 'a command'} (network: {'yes' if network else 'no'})", risk


def _permissions(params: Mapping[str, Any]) -> tuple[str, str]:
    asked = params.get("permissions") or {}
    parts = []
    if isinstance(asked, Mapping):
        if _network_requested({"permissions": asked}):
            parts.append("network")
        fs = asked.get("fileSystem") or {}
        if isinstance(fs, Mapping):
            for mode in ("read", "write"):
                if fs.get(mode):
                    parts.append(f"{mode} {len(fs[mode])} path(s)")
    return "Grant extra permissions" + (f": {', '.join(parts)}" if parts else ""), "high"


def describe_approval(method: str, params: Mapping[str, Any], *, workdir: str | None,
                      files: Iterable[str] = ()) -> tuple[str, str, str]:
    """``(kind, summary, risk)`` for an approval or user-input server request.

    ``files`` are the paths of the item the request is about (the fileChange request
    itself carries none; the reducer knows them from the item's ``item/started``).
    """
    params = params if isinstance(params, Mapping) else {}
    kind = APPROVAL_REQUESTS.get(method, "permissions")
    if kind == "command":
        summary, risk = _command(params)
    elif kind == "fileChange":
        paths = [_relative(p, workdir) for p in files]
        changes = params.get("fileChanges")
        if not paths and isinstance(changes, Mapping):
            paths = [_relative(str(p), workdir) for p in changes]
        summary = _files_label(paths) if paths else "Edit files"
        risk = "high" if params.get("grantRoot") else "medium"
        if params.get("grantRoot"):
            summary += " (and allow writes outside the workdir)"
    elif kind == "permissions":
        summary, risk = _permissions(params)
    elif method == "mcpServer/elicitation/request":
        summary, risk = f"MCP server {params.get('serverName') or '?'} asks for input", "low"
    else:
        count = len(params.get("questions") or [])
        summary, risk = f"Answer {count} question{'' if count == 1 else 's'}", "low"
    return kind, summary, risk


# ---------------------------------------------------------------------------- reducing


def _find(card: Card, request_key: int | None, item_key: int | None,
          approval_id: str | None = None) -> int | None:
    for index, entry in enumerate(card.approvals):
        if (request_key is not None and entry.request_key == request_key) or \
           (approval_id is not None and entry.id == approval_id):
            return index
    for index, entry in enumerate(card.approvals):
        if item_key is not None and entry.item_key == item_key and entry.status == "pending":
            return index
    return None


def _put(card: Card, index: int | None, entry: Approval) -> Card:
    approvals = list(card.approvals)
    if index is None:
        approvals.append(entry)
    else:
        approvals[index] = entry
    kept, dropped = trim(approvals, MAX_APPROVALS)  # the pending ones and the newest stay
    if dropped:
        card = card.with_omitted("approvals", dropped)
    return with_approvals(card, kept)


def _next_number(card: Card) -> int:
    """The sequence number of a new entry: counted over the left-out ones too, so an id
    is never given twice in a task."""
    return len(card.approvals) + card.omitted_count("approvals") + 1


def with_approvals(card: Card, approvals: tuple[Approval, ...]) -> Card:
    """Set approvals and derive waitingApproval / waitingInput from what is still open."""
    waiting = [a for a in approvals if a.status == "pending" and not a.resolved]
    status = card.status
    if status not in TERMINAL and status != TaskStatus.QUEUED:
        if any(a.kind in INPUT_KINDS for a in waiting):
            status = TaskStatus.WAITING_INPUT
        elif waiting:
            status = TaskStatus.WAITING_APPROVAL
        else:
            status = TaskStatus.RUNNING
    return card.evolve(approvals=approvals, status=status)


def on_request(card: Card, message: Mapping[str, Any]) -> Card:
    """A codex approval / user-input server request: one pending entry."""
    method, params = message["method"], message.get("params") or {}
    request_key = key_of(message.get("id"))
    item_key = key_of(params.get("itemId") or params.get("callId"))
    files = [c.path for c in card.fileChanges if item_key is not None and c.item_key == item_key]
    kind, summary, risk = describe_approval(method, params, workdir=card.workdir, files=files)
    index = _find(card, request_key, item_key)
    # The public id is a sequence number: codex request ids stay off the card. The runner
    # names its Boss approval itself and joins it with ``boss/approval {requestId}``.
    public_id = card.approvals[index].id if index is not None else f"approval-{_next_number(card)}"
    entry = Approval(public_id, kind, "pending", risk, summary, request_key, item_key)
    return _put(card, index, entry)


def on_resolved(card: Card, params: Mapping[str, Any]) -> Card:
    """codex settled a request. The decision itself comes from the item or the runner;
    after ``turn/completed`` the entry is already closed and this changes nothing."""
    index = _find(card, key_of(params.get("requestId")), None)
    if index is None or card.approvals[index].status != "pending":
        return card
    old = card.approvals[index]
    return _put(card, index, Approval(old.id, old.kind, old.status, old.risk, old.summary,
                                      old.request_key, old.item_key, resolved=True))


def on_item_outcome(card: Card, item_key: int | None, item_status: str) -> Card:
    """A completed item tells how its approval went: declined, or it ran."""
    if item_key is None or not card.approvals:
        return card
    index = _find(card, None, item_key)
    if index is None:
        return card
    old = card.approvals[index]
    status = "declined" if item_status == "declined" else "accepted"
    return _put(card, index, Approval(old.id, old.kind, status, old.risk, old.summary,
                                      old.request_key, old.item_key, True))


def on_review(card: Card, params: Mapping[str, Any]) -> Card:
    """``item/autoApprovalReview/started|completed``: the guardian's verdict."""
    review = mapping(params.get("review"))
    action = mapping(params.get("action"))
    kind = _REVIEW_KIND.get(str(action.get("type")), "permissions")
    status = _REVIEW_STATUS.get(str(review.get("status")), "pending")
    risk = _RISK.get(review.get("riskLevel") or "", "medium")
    item_key = key_of(params.get("targetItemId") or params.get("reviewId"))
    review_key = key_of(("review", params.get("reviewId")))
    index = _find(card, review_key, None)
    if index is None:
        index = _find(card, None, item_key)
    summary = {"command": "Auto-review of a command", "fileChange": "Auto-review of a file edit"}.get(
        kind, "Auto-review of a permission request")
    public_id = card.approvals[index].id if index is not None else f"review-{_next_number(card)}"
    return _put(card, index, Approval(public_id, kind, status, risk, summary, review_key, item_key))


def on_boss_approval(card: Card, params: Mapping[str, Any]) -> Card:
    """The runner's own record; ``requestId`` (an extension) joins it to the codex entry."""
    approval_id = str(params.get("id") or "")
    request_key = key_of(params.get("requestId")) if "requestId" in params else None
    index = _find(card, request_key, None, approval_id or None)
    old = card.approvals[index] if index is not None else None
    entry = Approval(
        approval_id or (old.id if old else f"boss-{_next_number(card)}"),
        str(params.get("kind") or (old.kind if old else "command")),
        str(params.get("status") or (old.status if old else "pending")),
        str(params.get("risk") or (old.risk if old else "medium")),
        str(params.get("summary") or (old.summary if old else "")),
        old.request_key if old else request_key, old.item_key if old else None,
        old.resolved if old else False)
    return _put(card, index, entry)


def _closed_status(entry: Approval) -> str:
    # Resolved before the turn ended means the client answered it. A command or a file
    # edit reports the decision through its item; a user-input request has no item, so
    # an answered one is "accepted". An unanswered request is resolved only after
    # ``turn/completed`` (the cleanup), so it is still unresolved here: cancelled.
    return "accepted" if entry.resolved and entry.kind in INPUT_KINDS else "cancelled"


def close_pending(card: Card) -> Card:
    """Turn end / task end: what is still pending will not be answered any more."""
    if not any(a.status == "pending" for a in card.approvals):
        return card
    closed = tuple(Approval(a.id, a.kind, _closed_status(a), a.risk, a.summary, a.request_key,
                            a.item_key, True) if a.status == "pending" else a
                   for a in card.approvals)
    return with_approvals(card, closed)
