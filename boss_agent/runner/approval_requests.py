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
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from boss_agent import metrics
from boss_agent.progress.approval_view import (
    ELICITATION,
    MAX_QUESTIONS,
    PERMISSIONS,
    USER_INPUT,
    ApprovalView,
    available_decisions,
    build,
)
from boss_agent.runner.feed import CardFeed
from boss_agent.tasks import ApprovalRequest, TaskSink

if TYPE_CHECKING:
    from boss_agent.appserver.routing import ServerRequest

logger = logging.getLogger(__name__)

APPROVAL_METHODS = frozenset({
    "item/commandExecution/requestApproval",
    "item/fileChange/requestApproval",
    "item/permissions/requestApproval",
    "item/tool/requestUserInput",
    "mcpServer/elicitation/request",  # MCP tool-call approvals (e.g. the CUA driver's click)
})
ELICITATION_DECISIONS = ("accept", "decline", "cancel")
DEFAULT_DECISIONS = ("accept", "acceptForSession", "decline", "cancel")
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


def describe(method: str, params: dict[str, Any], workdir: str, *, sandbox: str | None = None,
             item: Mapping[str, Any] | None = None) -> ApprovalView:
    """The request as the person sees it (``approval_view.build``, the one place)."""
    return build(method, params, workdir=workdir, sandbox=sandbox, item=item)


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
                 timeout_s: float, workdir: str, attempt: int = 1, sandbox: str | None = None,
                 items: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self.task_id = task_id
        self.attempt = attempt
        self.feed = feed
        self.sink = sink
        self.approval_mode = approval_mode
        self.timeout_s = timeout_s
        self.workdir = workdir
        self.sandbox = sandbox  # the task's effective sandbox mode: what a command runs under
        # The turn's items as codex announced them (item/started), by id: a request names
        # its item, whose changes or arguments are what the person decides on.
        self.items: Mapping[str, Mapping[str, Any]] = items if items is not None else {}
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
        item_id = params.get("itemId") or params.get("callId")
        view = describe(request.method, params, self.workdir, sandbox=self.sandbox,
                        item=self.items.get(item_id) if isinstance(item_id, str) else None)
        # requestId joins this record to the card's entry for the codex request itself;
        # the card gets the summary and risk, never the detail.
        entry = {"id": aid, "kind": view.kind, "risk": view.risk, "summary": view.summary,
                 "requestId": request.id}
        if self.approval_mode == "deny":
            result, status = codex_answer(request.method, params, None)
            await request.respond(result)
            await self.feed.event("approval", **entry, status=status)
            return
        await self.feed.event("approval", **entry, status="pending")
        status = "cancelled"
        try:
            decision = await self._ask(request.method, params, aid, view)
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

    async def _ask(self, method: str, params: dict[str, Any], aid: str,
                   view: ApprovalView) -> str | dict[str, Any] | None:
        offered = (() if method == USER_INPUT else ELICITATION_DECISIONS
                   if method == ELICITATION else _decisions(params))
        ask = ApprovalRequest(
            approval_id=aid, kind=view.kind, summary=view.summary, risk=view.risk,
            available_decisions=available_decisions(view, offered) if offered else (),
            questions=view.questions, details=view.extras, detail=view.detail,
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
