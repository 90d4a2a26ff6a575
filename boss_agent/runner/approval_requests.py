"""Codex approval and user-input requests, answered through the task's sink.

Each Codex server request becomes exactly one ``ApprovalRequest``: its id is
derived from the task id, the attempt, the app-server connection's nonce and the
request id. A request delivered twice maps to the same approval and is asked once;
a retried task (a new attempt) or a new connection (codex restarts request ids at 0
on each) never names an earlier approval, so it cannot inherit its decision. The wait
for the user's decision runs as its own task in the turn's task group, so
notifications keep flowing while the phone decides. No decision in
``codex.approval_timeout_s`` declines; ``approvalMode: deny`` declines at once;
a decision arriving after Codex resolved the request is dropped.

Whenever the wait ends without the person's decision (Codex resolved the request, the
turn ended, the task was cancelled, the timeout) the sink is told to withdraw the
approval, so no surface keeps offering a decision that can change nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from typing import TYPE_CHECKING, Any

from boss_agent import metrics
from boss_agent.jsonshape import mapping
from boss_agent.progress.approval_card import describe_approval
from boss_agent.redact import sanitize_text
from boss_agent.runner.feed import CardFeed
from boss_agent.tasks import ApprovalRequest, TaskSink

if TYPE_CHECKING:
    from boss_agent.appserver.routing import ServerRequest
    from boss_agent.appserver.protocol import (
        AdditionalFileSystemPermissions,
        RequestPermissionProfile,
        ToolRequestUserInputQuestion,
    )

logger = logging.getLogger(__name__)

APPROVAL_METHODS = frozenset({
    "item/commandExecution/requestApproval",
    "item/fileChange/requestApproval",
    "item/permissions/requestApproval",
    "item/tool/requestUserInput",
    "mcpServer/elicitation/request",  # MCP tool-call approvals (e.g. the CUA driver's click)
})
USER_INPUT = "item/tool/requestUserInput"
PERMISSIONS = "item/permissions/requestApproval"
ELICITATION = "mcpServer/elicitation/request"
ELICITATION_DECISIONS = ("accept", "decline", "cancel")
DEFAULT_DECISIONS = ("accept", "acceptForSession", "decline", "cancel")
MAX_QUESTIONS = 10  # request_user_input asks a handful; more is not something a phone shows
MAX_REASON_CHARS = 200  # device API §6: Codex's stated reason, sanitized and short
MAX_SCHEMA_CHARS = 10_000  # an MCP form has a handful of fields; a bigger one is not for a phone
WITHDRAW_TIMEOUT_S = 10.0  # best effort: a slow server must not hold the turn's end
CARD_STATUS = {"accept": "accepted", "acceptForSession": "accepted", "decline": "declined",
               "cancel": "cancelled"}


def approval_id(task_id: str, attempt: int, connection: str, request_id: object) -> str:
    digest = hashlib.sha256(f"{task_id}\0{attempt}\0{connection}\0{request_id!r}".encode()).hexdigest()
    return f"apr_{digest[:24]}"


def _decisions(params: dict[str, Any]) -> tuple[str, ...]:
    offered = [d for d in params.get("availableDecisions") or () if isinstance(d, str)]
    if not offered:
        return DEFAULT_DECISIONS
    # codex accepts "decline" even when it does not list it (facts 3c C).
    return tuple(dict.fromkeys([*offered, "decline"]))


def _questions(params: dict[str, Any], workdir: str) -> tuple[dict[str, Any], ...]:
    out = []
    asked: list[ToolRequestUserInputQuestion] = params.get("questions") or []
    for q in asked[:MAX_QUESTIONS]:
        if not isinstance(q, dict):
            continue
        options = [{"label": sanitize_text(o.get("label", ""), workdir=workdir, limit=200),
                    "description": sanitize_text(o.get("description") or "", workdir=workdir, limit=300)}
                   for o in q.get("options") or [] if isinstance(o, dict)]
        # The contract's names (device API §6): allowOther for codex's isOther, secret for isSecret.
        out.append({"id": sanitize_text(q.get("id", ""), limit=100),
                    "header": sanitize_text(q.get("header") or "", workdir=workdir, limit=100),
                    "question": sanitize_text(q.get("question") or "", workdir=workdir, limit=500),
                    "options": options, "allowOther": bool(q.get("isOther", True)),
                    "secret": bool(q.get("isSecret"))})
    return tuple(out)


def user_input_answers(decision: object) -> dict[str, dict[str, list[str]]]:
    """Codex's ``{qid: {"answers": [...]}}`` from the contract's ``{"answers": {qid: [...]}}``.

    Codex's own shape is accepted too (an older control plane stored it that way).
    """
    answers = decision.get("answers") if isinstance(decision, dict) else None
    out: dict[str, dict[str, list[str]]] = {}
    for qid, value in (answers.items() if isinstance(answers, dict) else ()):
        if isinstance(value, dict):
            value = value.get("answers")
        values = value if isinstance(value, list) else [value]
        texts = [v for v in values if isinstance(v, str)][:MAX_QUESTIONS]
        if isinstance(qid, str) and texts:
            out[qid] = {"answers": texts}
    return out


def _permission_facts(asked: RequestPermissionProfile | None, workdir: str) -> list[str]:
    """What a permissions request asks, as short facts; paths relative to the workdir."""
    facts: list[str] = []
    if not isinstance(asked, dict):
        return facts
    network = asked.get("network")
    if isinstance(network, dict) and network.get("enabled"):
        facts.append("network access")
    files = asked.get("fileSystem")
    fs: AdditionalFileSystemPermissions = files if isinstance(files, dict) else {}
    for mode, paths in (("write", fs.get("write")), ("read", fs.get("read"))):
        for path in (paths or [])[:MAX_QUESTIONS]:
            if isinstance(path, str):
                facts.append(f"{mode}: {sanitize_text(path, workdir=workdir, limit=200)}")
    return facts


def _schema(value: object, workdir: str) -> dict[str, Any] | None:
    """An MCP form's schema, its texts sanitized; None when it is not a small object."""
    if not isinstance(value, dict) or len(json.dumps(value, default=str)) > MAX_SCHEMA_CHARS:
        return None

    def clean(node: object) -> object:
        if isinstance(node, dict):
            return {str(k)[:100]: clean(v) for k, v in node.items()}
        if isinstance(node, list):
            return [clean(v) for v in node]
        return sanitize_text(node, workdir=workdir, limit=500) if isinstance(node, str) else node
    cleaned = clean(value)
    return cleaned if isinstance(cleaned, dict) else None


def details(method: str, params: dict[str, Any], workdir: str) -> dict[str, Any]:
    """The kind-specific fields of device API §6, each string sanitized like the card."""
    out: dict[str, Any] = {}
    reason = params.get("reason") or params.get("justification")
    if isinstance(reason, str) and reason.strip():
        out["reason"] = sanitize_text(reason, workdir=workdir, limit=MAX_REASON_CHARS)
    if method == PERMISSIONS:
        out["permissions"] = _permission_facts(params.get("permissions"), workdir)
    elif method == ELICITATION:
        mode = "url" if params.get("mode") == "url" else "form"
        out["message"] = sanitize_text(params.get("message") or "", workdir=workdir, limit=500)
        out["mode"] = mode
        if mode == "url" and isinstance(params.get("url"), str):
            out["url"] = sanitize_text(params["url"], limit=500)
        schema = _schema(params.get("requestedSchema"), workdir) if mode == "form" else None
        if schema is not None:
            out["schema"] = schema
    return out


def describe(method: str, params: dict[str, Any], workdir: str) -> tuple[str, str, str]:
    """(kind, summary, risk): the card's description, sharpened for MCP tool-call approvals.

    An MCP elicitation that codex raises to approve a tool call names the server and the
    tool (never its arguments); a tool that says it is destructive is high risk.
    """
    kind, summary, risk = describe_approval(method, params, workdir=workdir)
    meta = mapping(params.get("_meta"))
    if method == ELICITATION and meta.get("codex_approval_kind") == "mcp_tool_call":
        server = sanitize_text(params.get("serverName") or "?", limit=60)
        tool = sanitize_text(meta.get("tool_name") or "?", limit=80)
        hints = mapping(meta.get("tool_annotations"))
        risk = "high" if hints.get("destructiveHint") else "low" if hints.get("readOnlyHint") else "medium"
        return "permissions", f"Use the {server} tool {tool}", risk
    return kind, summary, risk


def codex_answer(method: str, params: dict[str, Any], decision: str | dict[str, Any] | None
                 ) -> tuple[dict[str, Any], str]:
    """The result to send Codex for ``decision`` (None: declined) and the card status."""
    if method == USER_INPUT:
        answers = user_input_answers(decision)
        if answers:
            return {"answers": answers}, "accepted"
        return {"answers": {}}, "declined"
    if method == ELICITATION:
        content = decision.get("content") if isinstance(decision, dict) else None
        action = decision.get("action", decision.get("decision")) if isinstance(decision, dict) else decision
        action = "accept" if action == "acceptForSession" else action
        if action not in ELICITATION_DECISIONS:
            action = "decline"
        return {"action": action, "content": content if action == "accept" else None}, CARD_STATUS[action]
    if isinstance(decision, dict):
        decision = decision.get("decision")
    if decision not in CARD_STATUS:
        decision = "decline"
    if method == PERMISSIONS:
        if decision in ("accept", "acceptForSession"):
            scope = "session" if decision == "acceptForSession" else "turn"
            return {"permissions": params.get("permissions") or {}, "scope": scope}, "accepted"
        return {"permissions": {}, "scope": "turn"}, CARD_STATUS[decision]
    return {"decision": decision}, CARD_STATUS[decision]


class Approvals:
    """The approvals of one task's turn."""

    def __init__(self, *, task_id: str, feed: CardFeed, sink: TaskSink, approval_mode: str,
                 timeout_s: float, workdir: str, attempt: int = 1) -> None:
        self.task_id = task_id
        self.attempt = attempt
        self.feed = feed
        self.sink = sink
        self.approval_mode = approval_mode
        self.timeout_s = timeout_s
        self.workdir = workdir
        self._seen: set[str] = set()
        self._waiting: dict[object, asyncio.Task[None]] = {}  # codex request id -> its wait
        self._stop_reason: dict[object, str] = {}  # why a wait was cancelled (withdraw reason)

    def start(self, tg: asyncio.TaskGroup, request: ServerRequest) -> None:
        """Take one server request; the wait runs in ``tg`` beside the notification loop."""
        params = request.params if isinstance(request.params, dict) else {}
        aid = approval_id(self.task_id, self.attempt, getattr(request, "connection", ""), request.id)
        if aid in self._seen:
            logger.debug("approval %s delivered again; already being handled", aid)
            return
        self._seen.add(aid)
        self._waiting[request.id] = tg.create_task(self._handle(request, params, aid))

    def resolved(self, request_id: object, reason: str = "resolved") -> None:
        """Codex resolved the request itself (turn interrupted): stop waiting for the user."""
        wait = self._waiting.pop(request_id, None)
        if wait is not None and not wait.done():
            self._stop_reason[request_id] = reason
            wait.cancel()

    def cancel_all(self, reason: str = "turn_ended") -> None:
        for request_id in list(self._waiting):
            self.resolved(request_id, reason)

    async def _handle(self, request: ServerRequest, params: dict[str, Any], aid: str) -> None:
        kind, summary, risk = describe(request.method, params, self.workdir)
        # requestId joins this record to the card's entry for the codex request itself.
        entry = {"id": aid, "kind": kind, "risk": risk, "summary": summary, "requestId": request.id}
        if self.approval_mode == "deny":
            result, status = codex_answer(request.method, params, None)
            await request.respond(result)
            await self.feed.event("approval", **entry, status=status)
            return
        await self.feed.event("approval", **entry, status="pending")
        status = "cancelled"
        try:
            decision = await self._ask(request.method, params, aid, kind, summary, risk)
        except asyncio.CancelledError:
            await self._withdraw(aid, self._stop_reason.pop(request.id, "turn_ended"))
            self._waiting.pop(request.id, None)
            await self.feed.event("approval", **entry, status=status)
            raise
        try:
            if request.answered:
                logger.info("approval %s decided after codex resolved it; dropped", aid)
                return
            result, status = codex_answer(request.method, params, decision)
            await request.respond(result)
        finally:
            self._waiting.pop(request.id, None)
            await self.feed.event("approval", **entry, status=status)

    async def _ask(self, method: str, params: dict[str, Any], aid: str, kind: str, summary: str,
                   risk: str) -> str | dict[str, Any] | None:
        ask = ApprovalRequest(
            approval_id=aid, kind=kind, summary=summary, risk=risk,  # type: ignore[arg-type]
            available_decisions=(() if method == USER_INPUT else ELICITATION_DECISIONS
                                 if method == ELICITATION else _decisions(params)),
            questions=_questions(params, self.workdir) if method == USER_INPUT else (),
            details=details(method, params, self.workdir),
        )
        try:
            with metrics.approval_waiting():
                async with asyncio.timeout(self.timeout_s):
                    return await self.sink.request_approval(ask)
        except TimeoutError:
            logger.info("approval %s timed out; declining", aid)
            await self._withdraw(aid, "timeout")
            return None
        except Exception as exc:  # noqa: BLE001 - the sink failed (network, server): the safe answer is no
            logger.warning("approval %s could not be asked (%s); declining", aid,
                           exc.__class__.__name__)
            return None

    async def _withdraw(self, aid: str, reason: str) -> None:
        try:
            async with asyncio.timeout(WITHDRAW_TIMEOUT_S):
                await self.sink.withdraw_approval(aid, reason)
        except Exception as exc:  # noqa: BLE001 - best effort; the decision is already moot
            logger.info("withdrawing approval %s failed (%s)", aid, exc.__class__.__name__)
