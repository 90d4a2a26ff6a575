"""Remote approvals (device API §6): ask the phone, wait for its decision.

One Codex approval request is exactly one approval on the server: the approval id
comes from the runner and is deterministic, so a retried POST names the same
approval (a ``409`` on create means it already exists). The decision is long-polled
until the task's approval timeout, which declines. A cancelled task stops waiting.
Whenever the wait ends without the person's decision (timeout, cancel, or the runner
reporting that Codex stopped waiting) the approval is withdrawn on the server, so the
app stops offering it.

When the daemon stops, nobody should have to answer for it to exit: ``cancel_waiting``
cancels the tasks that wait on a decision (and any that asks later), instead of letting
them hold the shutdown for the whole grace period.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from boss_agent.aio import race
from boss_agent.errors import BossAgentError, BossApiError, TaskGone, Unauthorized
from boss_agent.sources.boss.api import APPROVAL_WAIT_MS, BossApi
from boss_agent.tasks import ApprovalRequest, Task

logger = logging.getLogger(__name__)

DECLINE = "decline"
MIN_POLL_MS = 1_000  # the last poll before the timeout still gives the server a moment
WITHDRAW_TIMEOUT_S = 10.0  # best effort: a slow server must not hold the turn's end
_TIMED_OUT = object()  # _ask's answer when the deadline passed with no decision


class RemoteApprovals:
    def __init__(self, api: BossApi, timeout_s: float) -> None:
        self.api = api
        self.timeout_s = timeout_s
        self.stopping = False
        self._waiting: dict[tuple[str, str], asyncio.Event] = {}  # (task, approval) -> task's cancel

    def cancel_waiting(self) -> list[str]:
        """Stopping: cancel every task waiting on a decision, now and from here on."""
        self.stopping = True
        for cancel in self._waiting.values():
            cancel.set()
        return sorted({task_id for task_id, _ in self._waiting})

    async def request(self, task: Task, request: ApprovalRequest,
                      cancel: asyncio.Event) -> str | dict[str, Any]:
        """The user's decision, or ``"decline"`` on timeout, cancel or a dead server."""
        if task.approval_mode != "remote":
            return DECLINE
        if self.stopping:
            logger.info("task %s asked for an approval while the agent stops; cancelling it", task.task_id)
            cancel.set()
            return DECLINE
        deadline = time.monotonic() + self.timeout_s
        key = (task.task_id, request.approval_id)
        self._waiting[key] = cancel
        try:
            asked, _ = await race(self._ask(task, request, deadline), cancel.wait())
        finally:
            self._waiting.pop(key, None)
        if asked.cancelled() or asked.result() is _TIMED_OUT:
            reason = "cancelled" if asked.cancelled() else "timeout"
            await self.withdraw(task, request.approval_id, reason)
            return DECLINE
        decision: str | dict[str, Any] = asked.result()
        return decision

    async def withdraw(self, task: Task, approval_id: str, reason: str) -> None:
        """Tell the server Codex no longer waits; best effort (the server may be gone)."""
        try:
            async with asyncio.timeout(WITHDRAW_TIMEOUT_S):
                await self.api.withdraw_approval(task.task_id, approval_id, reason)
        except (BossAgentError, TimeoutError) as exc:
            logger.info("could not withdraw approval %s of task %s: %s", approval_id, task.task_id,
                        exc.__class__.__name__)

    async def _ask(self, task: Task, request: ApprovalRequest, deadline: float) -> Any:
        try:
            await self._create(task, request)
        except BossAgentError as exc:
            logger.warning("could not ask for approval on task %s (%s); declining", task.task_id, exc)
            return DECLINE
        while (remaining_ms := int((deadline - time.monotonic()) * 1000)) > 0:
            wait_ms = max(MIN_POLL_MS, min(APPROVAL_WAIT_MS, remaining_ms))
            try:
                answer = await self.api.approval_status(task.task_id, request.approval_id, wait_ms)
            except (TaskGone, Unauthorized) as exc:
                logger.warning("approval on task %s abandoned: %s", task.task_id, exc)
                return DECLINE
            except BossAgentError as exc:
                logger.info("approval poll on task %s failed: %s", task.task_id, exc)
                continue
            if answer.get("status") == "decided":
                return self._checked(request, answer)
            if answer.get("status") == "withdrawn":
                return DECLINE
        logger.info("approval on task %s timed out; declining", task.task_id)
        return _TIMED_OUT

    async def _create(self, task: Task, request: ApprovalRequest) -> None:
        body: dict[str, Any] = {
            "approvalId": request.approval_id, "kind": request.kind, "summary": request.summary,
            "risk": request.risk, "availableDecisions": list(request.available_decisions),
        }
        if request.questions:
            body["questions"] = list(request.questions)
        body.update(request.details)
        if request.detail is not None:
            body["detail"] = request.detail
        try:
            await self.api.create_approval(task.task_id, body)
        except BossApiError as exc:
            # A retried POST whose first try did land: the same approval already exists.
            # approval_conflict is another request under this id: never wait on its decision.
            if exc.status != 409 or exc.code in ("task_not_owned", "approval_conflict"):
                raise

    @staticmethod
    def _checked(request: ApprovalRequest, answer: dict[str, Any]) -> str | dict[str, Any]:
        """The server's decision as the runner takes it; anything not offered declines."""
        decision = answer.get("decision")
        if request.kind == "userInput" and isinstance(answer.get("answers"), dict):
            return {"answers": answer["answers"]}
        if request.kind == "userInput" and isinstance(decision, dict):  # an older server's shape
            return decision
        if isinstance(decision, str) and decision in request.available_decisions:
            if request.kind == "elicitation" and isinstance(answer.get("content"), dict):
                return {"decision": decision, "content": answer["content"]}
            return decision
        logger.warning("the server sent a decision this request does not offer; declining")
        return DECLINE
