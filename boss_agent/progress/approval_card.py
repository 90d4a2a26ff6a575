"""Approvals on the card: a safe description of each codex request, and its life.

``describe_approval`` gives a codex approval / user-input server request its
``(kind, summary, risk)`` from ``approval_view.build`` (the one place that builds what a
person decides on): the summary says what is asked ("Run 2 commands: ls, rm", "Edit 2
files: a.py, b.txt"), never the command text, the diff or the question text. The card
keeps only these: the ``detail`` a person decides on is never part of it.

One codex request is one card entry. Entries are keyed by the hashed server request id
and the hashed item id, so an auto-review of an item, the user's request for the same
item and the runner's ``boss/approval`` echo all land on the same entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from boss_agent.jsonshape import mapping
from boss_agent.lifecycles import TERMINAL, TaskStatus
from boss_agent.progress.approval_view import KIND_OF, build
from boss_agent.progress.bounds import MAX_APPROVALS, trim
from boss_agent.progress.card import Approval, Card, key_of

INPUT_KINDS = ("userInput", "elicitation")  # the person answers these; they wait on input
APPROVAL_REQUESTS = KIND_OF
_REVIEW_STATUS = {"inProgress": "pending", "approved": "autoApproved", "denied": "autoDenied",
                  "timedOut": "cancelled", "aborted": "cancelled"}
_REVIEW_KIND = {"command": "command", "execve": "command", "writeStdin": "command",
                "applyPatch": "fileChange", "networkAccess": "permissions",
                "mcpToolCall": "tool", "requestPermissions": "permissions"}
_RISK = {"low": "low", "medium": "medium", "high": "high", "critical": "high"}


def describe_approval(method: str, params: Mapping[str, Any], *, workdir: str | None,
                      item: Mapping[str, Any] | None = None) -> tuple[str, str, str]:
    """``(kind, summary, risk)`` of a request, as ``approval_view.build`` gives them.

    ``item`` is the thread item the request is about (the fileChange request itself
    names no files; the reducer knows them from the item's ``item/started``). The card
    does not know the task's sandbox, so it assumes the least; the runner's
    ``boss/approval`` record then sets the summary and risk it really asked with.
    """
    view = build(method, params, workdir=workdir, item=item)
    return view.kind, view.summary, view.risk


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
    changes = [{"path": c.path, "kind": c.change} for c in card.fileChanges
               if item_key is not None and c.item_key == item_key]
    kind, summary, risk = describe_approval(method, params, workdir=card.workdir,
                                            item={"changes": changes} if changes else None)
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
