"""The runner's own lifecycle events (``boss/*``) onto the card.

The runner knows things codex does not say: the task's status, which backend ran it,
the Boss approval ids, git facts after the turn, artifacts, sandbox caps. It feeds them
through the same reducer so the card has one writer and one shape (API_CARD.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from boss_agent.config import APPROVAL_POLICIES, SANDBOXES
from boss_agent.lifecycles import TERMINAL, TaskStatus
from boss_agent.progress import approval_card as approvals
from boss_agent.progress.card import BackgroundAgent, Branch, Card, Reasoning, Settings, Step, key_of
from boss_agent.progress.items import add_artifact, close_open_items, put_agent
from boss_agent.progress.notifications import add_warning

STATUSES = frozenset(TaskStatus)
BACKENDS = frozenset({"app_server", "exec", "cua"})
GITHUB_CLI = frozenset({"available", "unauthenticated", "missing"})
MAX_GIT_OPERATIONS = 20  # "commit", "push", … labels; a long list is not a summary


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def set_branch(card: Card, **changes: Any) -> Card:
    old = card.branch or Branch()
    values = {name: getattr(old, name) for name in old.__slots__}
    values.update(changes)
    return card.evolve(branch=Branch(**values))


def _status(card: Card, params: Mapping[str, Any]) -> Card:
    status = params.get("status")
    if status not in STATUSES:
        return card
    at = params.get("at") if isinstance(params.get("at"), str) else card.updatedAt
    changes: dict[str, Any] = {"status": status, "updatedAt": at}
    if status == "running" and not card.startedAt:
        changes["startedAt"] = at
    if status in TERMINAL:
        changes["completedAt"] = at
    return card.evolve(**changes)


def _finished(card: Card, params: Mapping[str, Any]) -> Card:
    """The task is over: nothing stays in progress or pending on the card."""
    status = params.get("status") if params.get("status") in TERMINAL else TaskStatus.COMPLETED
    done = status == TaskStatus.COMPLETED  # item and step spellings below, not task statuses
    card = close_open_items(card, "completed" if done else "interrupted")
    step_end = "completed" if done else "failed"
    steps = tuple(Step(s.title, step_end) if s.status == "inProgress" else s for s in card.steps)
    card = approvals.close_pending(card.evolve(steps=steps))
    if card.reasoningSummary is not None and card.reasoningSummary.status != "completed":
        card = card.evolve(reasoningSummary=Reasoning(card.reasoningSummary.text, "completed"))
    return _status(card, {"status": status, "at": params.get("at")})


def _backend(card: Card, params: Mapping[str, Any]) -> Card:
    backend = params.get("backend")
    return card.evolve(backend=backend) if backend in BACKENDS else card


def _branch(card: Card, params: Mapping[str, Any]) -> Card:
    """Git facts measured after the turn: they replace the diff-based counts."""
    old = card.branch or Branch()
    ops = params.get("gitOperations")
    ops = tuple(str(o) for o in ops[:MAX_GIT_OPERATIONS]) if isinstance(ops, list) else old.gitOperations
    gh = params.get("githubCli")
    name = params.get("name")
    return set_branch(
        card, name=name if isinstance(name, str) else old.name,
        changedFiles=_int(params.get("changedFiles"), old.changedFiles),
        insertions=_int(params.get("insertions"), old.insertions),
        deletions=_int(params.get("deletions"), old.deletions),
        gitOperations=ops, githubCli=gh if gh in GITHUB_CLI else old.githubCli)


def _artifacts(card: Card, params: Mapping[str, Any]) -> Card:
    for entry in params.get("artifacts") or ():
        if isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
            kind = entry.get("kind") if entry.get("kind") in (
                "image", "apk", "document", "archive", "file") else None
            card = add_artifact(card, entry["name"], kind)
    return card


def _limits(card: Card, params: Mapping[str, Any]) -> Card:
    """The approval policy and sandbox the task's turn runs under (labels of the task's
    vocabulary); codex's own ``thread/settings/updated`` keeps the other settings."""
    old = card.threadSettings or Settings(None, None, None, None, None, None)
    approval, sandbox = params.get("approvalPolicy"), params.get("sandbox")
    return card.evolve(threadSettings=Settings(
        old.model, old.provider, approval if approval in APPROVAL_POLICIES else old.approvalPolicy,
        sandbox if sandbox in SANDBOXES else old.sandbox, old.collaborationMode, old.reasoningEffort))


def _warning(card: Card, params: Mapping[str, Any]) -> Card:
    return add_warning(card, str(params.get("kind") or "warning"), params.get("message"))


AGENT_STATUSES = frozenset({"running", "completed", "failed", "interrupted"})


def _background_agent(card: Card, params: Mapping[str, Any]) -> Card:
    """A sub-agent thread of the task's turn; keyed like ``thread/started`` so both agree."""
    status = params.get("status")
    if status not in AGENT_STATUSES:
        return card
    key = key_of(("agent", params.get("thread")))
    old = next((a for a in card.backgroundAgents if a.key == key), None)
    name = old.name if old else str(params.get("name") or "sub-agent")
    return put_agent(card, key, BackgroundAgent(key, name, status, old.source if old else "subAgent"))


_BOSS = {
    "boss/status": _status,
    "boss/backend": _backend,
    "boss/approval": approvals.on_boss_approval,
    "boss/warning": _warning,
    "boss/limits": _limits,
    "boss/branch": _branch,
    "boss/artifacts": _artifacts,
    "boss/finished": _finished,
    "boss/backgroundAgent": _background_agent,
}


def reduce_boss(card: Card, method: str, params: Mapping[str, Any]) -> Card:
    handler = _BOSS.get(method)
    if handler is None:
        return card.evolve(ignored_count=card.ignored_count + 1)
    return handler(card, params)
