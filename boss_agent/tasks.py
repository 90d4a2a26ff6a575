"""The task as every source hands it to the runner, and the result it gets back.

Sources (the Boss HTTP API, the Redis gateway) parse their wire objects with
``parse_task``; the runner only ever sees a validated ``Task``. A malformed task
raises ``TaskRejected`` with the device-API error code, so the source can fail that
one task and go on.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from boss_agent.errors import TaskRejected
from boss_agent.progress.approval_view import ApprovalKind, Risk
from boss_agent.progress.card import Card

INTENTS = ("conversation_reply", "dispatch_execution", "thread_collaboration", "computer_use")
MAX_PROMPT_CHARS = 200_000  # a prompt larger than this is a client bug, not a task
MAX_ID_CHARS = 200
# A thread or turn ref is data that ends up in codex argv and RPC params: a codex id
# (a UUID matches this too) or a plain thread name. Never a leading "-", never a space.
THREAD_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
INVALID_THREAD_REF = "invalid_thread_ref"

Status = Literal["completed", "failed", "cancelled"]
Backend = Literal["app_server", "exec", "cua"]


@dataclass(frozen=True)
class Task:
    task_id: str
    prompt: str
    intent: str = "conversation_reply"
    attempt: int = 1
    project_id: str | None = None
    workdir: str | None = None
    codex_thread_ref: str | None = None
    source_thread_ref: str | None = None
    target_thread_ref: str | None = None
    target_turn_id: str | None = None
    model: str | None = None
    approval_mode: str = "remote"
    approval_policy: str | None = None
    sandbox: str | None = None
    collaboration_mode: str | None = None  # "plan": Codex may ask the person questions
    created_at: str | None = None

    def __repr__(self) -> str:  # the prompt never reaches a log line through repr
        return f"Task(task_id={self.task_id!r}, intent={self.intent!r}, attempt={self.attempt})"


@dataclass
class TaskResult:
    status: Status
    backend: Backend | None = None
    fallback_from: Backend | None = None
    codex_thread_ref: str | None = None
    turn_id: str | None = None
    result_text: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    execution_progress: dict[str, Any] = field(default_factory=dict)

    def to_wire(self) -> dict[str, Any]:
        """The body fields of device API §5 (without deviceId)."""
        error = None
        if self.error_code:
            error = {"code": self.error_code, "message": self.error_message or self.error_code}
        return {
            "status": self.status,
            "backend": self.backend,
            "fallbackFrom": self.fallback_from,
            "codexThreadRef": self.codex_thread_ref,
            "turnId": self.turn_id,
            "resultText": self.result_text,
            "error": error,
            "executionProgress": self.execution_progress,
        }


@dataclass(frozen=True)
class ApprovalRequest:
    """One Codex approval request as the phone sees it (already sanitized)."""

    approval_id: str
    kind: ApprovalKind
    summary: str
    risk: Risk
    available_decisions: tuple[str, ...]
    questions: tuple[dict[str, Any], ...] = ()
    # The optional fields of device API §6, already sanitized: reason, permissions,
    # and for an elicitation message, mode, schema or url.
    details: dict[str, Any] = field(default_factory=dict)
    # Device API §6 informed consent: exactly what accepting does (approval_view.build).
    # Shown while the approval is asked, never put on the card.
    detail: dict[str, Any] | None = None


class TaskSink(Protocol):
    """What a source gives the runner for one task."""

    async def progress(self, card: Card) -> None:
        """The card changed (called per streamed delta). Keep a reference and call
        ``card.to_dict()`` only when it is really sent: the card is immutable, so the
        last one kept is exactly what the runner had."""

    async def request_approval(self, request: ApprovalRequest) -> str | dict[str, Any]:
        """Ask the user; return the decision (or user-input answers). May block long."""

    async def withdraw_approval(self, approval_id: str, reason: str) -> None:
        """Codex stopped waiting before a decision (``resolved``, ``turn_ended``,
        ``cancelled``, ``timeout``): the person is no longer asked."""

    async def ready_to_run(self) -> None:
        """Awaited right before Codex may act (turn/start, turn/steer, injected items,
        codex exec), not before thread/start: the Boss source's running journal is
        written meanwhile."""

    async def turn_started(self, thread_ref: str, turn_id: str) -> None:
        """The live thread and turn, as soon as Codex named them (a source that lets its
        user steer the turn or continue the thread sends them on; the card never
        carries ids)."""


class SinkDefaults:
    """No-op ``withdraw_approval``, ``ready_to_run`` and ``turn_started`` for a sink whose
    source has nothing to do there: inherit it and write the two methods that matter."""

    async def withdraw_approval(self, approval_id: str, reason: str) -> None:
        return None

    async def ready_to_run(self) -> None:
        return None

    async def turn_started(self, thread_ref: str, turn_id: str) -> None:
        return None


def _opt_str(raw: Mapping[str, Any], key: str, limit: int = MAX_ID_CHARS) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > limit:
        raise TaskRejected(f"{key} must be a string of at most {limit} characters")
    return value or None


def _ref(raw: Mapping[str, Any], key: str) -> str | None:
    """A thread or turn reference, validated before anything can run with it."""
    value = raw.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not THREAD_REF.fullmatch(value):
        raise TaskRejected(f"{key} is not a codex thread id or thread name", INVALID_THREAD_REF)
    return value


REF_FIELDS = {"codex_thread_ref": "codexThreadRef", "source_thread_ref": "sourceCodexThreadRef",
              "target_thread_ref": "targetCodexThreadRef", "target_turn_id": "targetCodexTurnId"}


def check_refs(task: Task) -> None:
    """Re-check a task's refs where it is run, whoever built it (``TaskRejected``)."""
    for name, key in REF_FIELDS.items():
        _ref({key: getattr(task, name)}, key)


def _choice(raw: Mapping[str, Any], key: str, options: tuple[str, ...], default: str | None) -> str | None:
    value = raw.get(key)
    if value is None:
        return default
    if value not in options:
        raise TaskRejected(f"{key} must be one of {', '.join(options)}")
    return str(value)


def parse_task(raw: Any) -> Task:
    """Validate a device-API Task object; unknown extra fields are ignored."""
    if not isinstance(raw, Mapping):
        raise TaskRejected("a task must be a JSON object")
    task_id = raw.get("taskId")
    if not isinstance(task_id, str) or not task_id or len(task_id) > MAX_ID_CHARS:
        raise TaskRejected("taskId is missing or not a short string")
    prompt = raw.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise TaskRejected("prompt is missing or empty")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise TaskRejected(f"prompt is longer than {MAX_PROMPT_CHARS} characters", "prompt_too_large")
    intent = raw.get("intentCategory") or "conversation_reply"
    if intent not in INTENTS:
        raise TaskRejected("intentCategory is not supported by this device", "unsupported_intent")
    attempt = raw.get("attempt", 1)
    if not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 1:
        raise TaskRejected("attempt must be a positive integer")
    task = Task(
        task_id=task_id,
        prompt=prompt,
        intent=intent,
        attempt=attempt,
        project_id=_opt_str(raw, "projectId"),
        workdir=_opt_str(raw, "workdir", 4096),
        codex_thread_ref=_ref(raw, "codexThreadRef"),
        source_thread_ref=_ref(raw, "sourceCodexThreadRef"),
        target_thread_ref=_ref(raw, "targetCodexThreadRef"),
        target_turn_id=_ref(raw, "targetCodexTurnId"),
        model=_opt_str(raw, "model"),
        approval_mode=_choice(raw, "approvalMode", ("remote", "deny"), "remote") or "remote",
        approval_policy=_choice(raw, "approvalPolicy", ("untrusted", "on-request", "never"), None),
        sandbox=_choice(raw, "sandbox", ("read-only", "workspace-write", "danger-full-access"), None),
        collaboration_mode=_choice(raw, "collaborationMode", ("plan", "default"), None),
        created_at=_opt_str(raw, "createdAt"),
    )
    if intent == "thread_collaboration" and not (task.source_thread_ref and task.target_thread_ref):
        raise TaskRejected("thread_collaboration needs sourceCodexThreadRef and targetCodexThreadRef")
    return task


class TaskRunner(Protocol):
    """Runs one task end to end. Implemented by ``boss_agent.runner``.

    ``cancel`` is set by the source (a cancel request, a lost lease, shutdown): the
    runner interrupts the turn and returns a ``cancelled`` result. ``run`` never
    raises for a task-level failure; it returns a ``failed`` result instead.
    """

    async def run(self, task: Task, sink: TaskSink, cancel: asyncio.Event) -> TaskResult: ...
