"""Remote approvals (device API §6): one row per Codex approval request, then the decision.

A device creates an approval once (a retried create is the same approval) and
long-polls it; the user decides on the page or through the local API. A decision
is one of the request's ``availableDecisions``; for a ``userInput`` request, the
answers to its questions (device API §6)::

    {"answers": {"<question id>": ["<label or free text>"]}}

(Codex's own ``{"<id>": {"answers": [...]}}`` is accepted too); for an
``elicitation`` accepted with a form, ``{"decision": "accept", "content": {…}}``.

Deciding again with the same decision is a no-op; with another one it is a 409.
Decisions are stored as JSON text, so both shapes round-trip unchanged.

An approval belongs to one attempt of its task: a Retry archives the task's approvals,
so attempt 2 never sees (or inherits) attempt 1's decisions. Creating an id that
exists with a different request, or that an earlier attempt used, is a 409
``approval_conflict``. When Codex stops waiting the device withdraws the approval: it
is marked ``withdrawn`` (with the reason) and a decision on it is a 409
``approval_withdrawn``.

The request's ``detail`` (what accepting does, §6) is kept only while the approval is
pending: deciding or withdrawing it drops the detail from the stored request, so the
command lines and paths are not kept beyond the decision they were shown for.
"""

from __future__ import annotations

from typing import Any

from boss_agent.controlplane.db import Database, dumps, iso, loads
from boss_agent.errors import ControlPlaneError

DEFAULT_DECISIONS = ("accept", "decline")
WITHDRAW_REASONS = ("resolved", "turn_ended", "cancelled", "timeout")
MAX_ANSWERS = 20  # questions per request, answers per question: Codex asks a handful
MAX_ANSWER_CHARS = 2000
MAX_CONTENT_CHARS = 20_000  # an MCP form's content: a handful of fields


def _invalid(message: str) -> ControlPlaneError:
    return ControlPlaneError(400, "invalid_decision", message)


def check_answers(decision: dict[str, Any]) -> None:
    """Raise 400 ``invalid_decision`` unless ``decision`` is a userInput answer object."""
    answers = decision.get("answers")
    if set(decision) != {"answers"} or not isinstance(answers, dict) or len(answers) > MAX_ANSWERS:
        raise _invalid('answers must look like {"answers": {"<question id>": ["…"]}}')
    for question_id, answer in answers.items():
        texts = answer.get("answers") if isinstance(answer, dict) else answer
        if not isinstance(texts, list) or len(texts) > MAX_ANSWERS or not all(
                isinstance(t, str) and len(t) <= MAX_ANSWER_CHARS for t in texts):
            raise _invalid(f"the answer to {question_id!r} must be a list of strings")


def check_content(decision: dict[str, Any]) -> None:
    """An elicitation's accepted form: ``{"decision": "accept", "content": {…}}``."""
    if set(decision) != {"decision", "content"} or decision["decision"] != "accept" \
            or not isinstance(decision["content"], dict) or len(dumps(decision["content"])) > MAX_CONTENT_CHARS:
        raise _invalid('a form answer must look like {"decision": "accept", "content": {…}}')


def poll_answer(decision: Any) -> dict[str, Any]:
    """The device's view of a decision (§6): answers and content ride beside ``decision``."""
    if isinstance(decision, dict) and "answers" in decision:
        answers = {qid: (a.get("answers") if isinstance(a, dict) else a)
                   for qid, a in decision["answers"].items()}
        return {"status": "decided", "decision": "accept", "answers": answers}
    if isinstance(decision, dict):
        return {"status": "decided", "decision": decision.get("decision"), "content": decision.get("content")}
    return {"status": "decided", "decision": decision}


DROP_DETAIL = "request = json_remove(request, '$.detail')"  # decided or withdrawn: shown no more


def without_detail(request: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in request.items() if k != "detail"}


class Approvals:
    def __init__(self, db: Database) -> None:
        self.db = db

    def create(self, task_id: str, request: dict[str, Any]) -> bool:
        """Store one approval request; False when the same request already existed (a retry)."""
        row = self.db.one("SELECT request, archived FROM approvals WHERE task_id = ? AND approval_id = ?",
                          task_id, request["approvalId"])
        if row is not None:
            stored = loads(row["request"])
            if "detail" not in stored:  # decided or withdrawn since: the detail was dropped
                request = without_detail(request)
            if row["archived"] or stored != request:
                raise ControlPlaneError(409, "approval_conflict",
                                        "an approval with this id exists for another request")
            return False
        self.db.conn.execute(
            "INSERT INTO approvals (task_id, approval_id, request, status, created_at)"
            " VALUES (?, ?, ?, 'pending', ?)",
            (task_id, request["approvalId"], dumps(request), self.db.clock()),
        )
        return True

    def get(self, task_id: str, approval_id: str) -> dict[str, Any]:
        row = self.db.one("SELECT * FROM approvals WHERE task_id = ? AND approval_id = ? AND archived = 0",
                          task_id, approval_id)
        if row is None:
            raise ControlPlaneError(404, "approval_not_found", "no such approval")
        return self._view(row)

    def for_task(self, task_id: str) -> list[dict[str, Any]]:
        rows = self.db.all("SELECT * FROM approvals WHERE task_id = ? AND archived = 0"
                           " ORDER BY created_at, rowid", task_id)
        return [self._view(row) for row in rows]

    def archive(self, task_id: str) -> None:
        """A new attempt begins: the earlier attempts' approvals leave the task's view."""
        self.db.conn.execute("UPDATE approvals SET archived = 1 WHERE task_id = ?", (task_id,))

    def withdraw(self, task_id: str, approval_id: str, reason: str) -> bool:
        """Codex stopped waiting: a pending approval becomes withdrawn. True if it changed."""
        self.get(task_id, approval_id)  # 404 for an unknown one
        cur = self.db.conn.execute(
            f"UPDATE approvals SET status = 'withdrawn', withdraw_reason = ?, decided_at = ?, {DROP_DETAIL}"
            " WHERE task_id = ? AND approval_id = ? AND status = 'pending' AND archived = 0",
            (reason, self.db.clock(), task_id, approval_id))
        return cur.rowcount == 1

    @staticmethod
    def _view(row: Any) -> dict[str, Any]:
        view = {**loads(row["request"]), "status": row["status"], "decision": loads(row["decision"]),
                "createdAt": iso(row["created_at"]), "decidedAt": iso(row["decided_at"])}
        if row["status"] == "withdrawn":
            view["withdrawReason"] = row["withdraw_reason"]
        return view

    def decide(self, task_id: str, approval_id: str, decision: str | dict[str, Any]) -> None:
        current = self.get(task_id, approval_id)
        if current["status"] == "withdrawn":
            raise ControlPlaneError(409, "approval_withdrawn", "Codex no longer waits for this approval")
        if current["status"] == "decided":
            if current["decision"] == decision:
                return
            raise ControlPlaneError(409, "approval_already_decided", "the approval was already decided")
        if isinstance(decision, dict):
            if current.get("kind") == "userInput":
                check_answers(decision)
            elif current.get("kind") == "elicitation":
                check_content(decision)
            else:
                raise _invalid("only userInput and elicitation approvals take an object")
        elif decision not in (current.get("availableDecisions") or DEFAULT_DECISIONS):
            raise _invalid("decision is not one of availableDecisions")
        self.db.conn.execute(
            f"UPDATE approvals SET status = 'decided', decision = ?, decided_at = ?, {DROP_DETAIL}"
            " WHERE task_id = ? AND approval_id = ? AND status = 'pending'",
            (dumps(decision), self.db.clock(), task_id, approval_id),
        )
