"""Remote approvals (device API §6): one row per Codex approval request, then the decision.

A device creates an approval once (a retried create is the same approval) and
long-polls it; the user decides on the page or through the local API. A decision
is one of the request's ``availableDecisions`` or, for a ``userInput`` request,
the answers to its questions in Codex's shape::

    {"answers": {"<question id>": {"answers": ["<label or free text>"]}}}

Deciding again with the same decision is a no-op; with another one it is a 409.
Decisions are stored as JSON text, so both shapes round-trip unchanged.
"""

from __future__ import annotations

from typing import Any

from boss_agent.controlplane.db import Database, dumps, iso, loads
from boss_agent.errors import ControlPlaneError

DEFAULT_DECISIONS = ("accept", "decline")
MAX_ANSWERS = 20  # questions per request, answers per question: Codex asks a handful
MAX_ANSWER_CHARS = 2000


def _invalid(message: str) -> ControlPlaneError:
    return ControlPlaneError(400, "invalid_decision", message)


def check_answers(decision: dict[str, Any]) -> None:
    """Raise 400 ``invalid_decision`` unless ``decision`` is a userInput answer object."""
    answers = decision.get("answers")
    if set(decision) != {"answers"} or not isinstance(answers, dict) or len(answers) > MAX_ANSWERS:
        raise _invalid('answers must look like {"answers": {"<question id>": {"answers": ["…"]}}}')
    for question_id, answer in answers.items():
        texts = answer.get("answers") if isinstance(answer, dict) else None
        if not isinstance(texts, list) or len(texts) > MAX_ANSWERS or not all(
                isinstance(t, str) and len(t) <= MAX_ANSWER_CHARS for t in texts):
            raise _invalid(f"the answer to {question_id!r} must be {{'answers': [strings]}}")


class Approvals:
    def __init__(self, db: Database) -> None:
        self.db = db

    def create(self, task_id: str, request: dict[str, Any]) -> bool:
        """Store one approval request; False when it already existed (a retry)."""
        cur = self.db.conn.execute(
            "INSERT OR IGNORE INTO approvals (task_id, approval_id, request, status, created_at)"
            " VALUES (?, ?, ?, 'pending', ?)",
            (task_id, request["approvalId"], dumps(request), self.db.clock()),
        )
        return cur.rowcount == 1

    def get(self, task_id: str, approval_id: str) -> dict[str, Any]:
        row = self.db.one("SELECT * FROM approvals WHERE task_id = ? AND approval_id = ?", task_id, approval_id)
        if row is None:
            raise ControlPlaneError(404, "approval_not_found", "no such approval")
        return self._view(row)

    def for_task(self, task_id: str) -> list[dict[str, Any]]:
        rows = self.db.all("SELECT * FROM approvals WHERE task_id = ? ORDER BY created_at, rowid", task_id)
        return [self._view(row) for row in rows]

    @staticmethod
    def _view(row: Any) -> dict[str, Any]:
        return {**loads(row["request"]), "status": row["status"], "decision": loads(row["decision"]),
                "createdAt": iso(row["created_at"]), "decidedAt": iso(row["decided_at"])}

    def decide(self, task_id: str, approval_id: str, decision: str | dict[str, Any]) -> None:
        current = self.get(task_id, approval_id)
        if current["status"] == "decided":
            if current["decision"] == decision:
                return
            raise ControlPlaneError(409, "approval_already_decided", "the approval was already decided")
        if isinstance(decision, dict):
            if current.get("kind") != "userInput":
                raise _invalid("only a userInput approval takes answers")
            check_answers(decision)
        elif decision not in (current.get("availableDecisions") or DEFAULT_DECISIONS):
            raise _invalid("decision is not one of availableDecisions")
        self.db.conn.execute(
            "UPDATE approvals SET status = 'decided', decision = ?, decided_at = ?"
            " WHERE task_id = ? AND approval_id = ? AND status = 'pending'",
            (dumps(decision), self.db.clock(), task_id, approval_id),
        )
