"""Gateway ask-user forms: formId, RESUME by formId, strays dropped, withdrawal, questions.

Only a RESUME naming the open form's ``formId`` accepts; one without it may decline
the form it was sent after. The real-codex double tap and foreign session are in
tests/peers/codex/test_approvals_resume.py.

by-framework 0.2.1's GatewayClient sends the RESUMEs on a real redis-server; the
runner is an in-test script (the gateway's form handling is the subject here; the
real-codex user-input round trip is in test_approvals_kinds.py).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from boss_agent.tasks import ApprovalRequest, Task, TaskResult
from tests.support.gateway import (
    ask,
    delta_text,
    read_events,
    resume,
    running_gateway,
    sdk_client,
    sdk_redis,
)

pytestmark = pytest.mark.redis

QUESTION = {"id": "db_choice", "header": "Database", "question": "Which database should we use?",
            "options": [{"label": "Postgres", "description": "Robust default."},
                        {"label": "SQLite", "description": "Zero setup."}], "isSecret": False}


class TwoApprovals:
    """Asks ``first`` then ``second`` (or withdraws ``first`` when told to); records decisions."""

    def __init__(self) -> None:
        self.decisions: list[Any] = []
        self.withdraw = asyncio.Event()
        self.sinks: dict[str, Any] = {}

    async def run(self, task: Task, sink: Any, cancel: asyncio.Event) -> TaskResult:
        self.sinks[task.task_id] = sink
        verb = task.prompt
        if verb == "questions":
            asked = ApprovalRequest("apr_q", "userInput", "Codex asks", "low", (), (QUESTION,))
            self.decisions.append(await sink.request_approval(asked))
            return TaskResult("completed", result_text="answered")
        if verb == "withdraw":
            wait = asyncio.ensure_future(sink.request_approval(_command("apr_w")))
            await self.withdraw.wait()
            wait.cancel()
            await sink.withdraw_approval("apr_w", "resolved")
            self.decisions.append(await _command_decision(sink, "apr_after"))
            return TaskResult("completed", result_text="after withdraw")
        for approval_id in ("apr_first", "apr_second"):
            self.decisions.append(await _command_decision(sink, approval_id))
        return TaskResult("completed", result_text=" ".join(map(str, self.decisions)))


def _command(approval_id: str) -> ApprovalRequest:
    return ApprovalRequest(approval_id, "command", f"Run pytest ({approval_id})", "low",
                           ("accept", "decline", "cancel"))


async def _command_decision(sink: Any, approval_id: str) -> Any:
    return await sink.request_approval(_command(approval_id))


async def _forms(redis: Any, message_id: str, count: int) -> list[dict[str, Any]]:
    """The task's first ``count`` ask-user forms (3013), as a Boss client parses them."""
    forms: list[dict[str, Any]] = []

    def enough(message: Any) -> bool:
        if message.data["contentType"] == "3013":
            forms.append(json.loads(delta_text(message)))
        return len(forms) >= count

    await read_events(redis, "s1", message_id, until=enough)
    return forms


async def test_a_form_carries_its_id_and_a_duplicate_or_stray_resume_never_answers_the_next_one(
        redis_server):
    redis = sdk_redis(redis_server.url)
    client = sdk_client(redis)
    runner = TwoApprovals()
    async with running_gateway(redis_server.url, runner) as gateway:
        await ask(client, "s1", "two", "msg-two")
        (first,) = await _forms(redis, "msg-two", 1)
        assert first["formId"] == "apr_first"
        await resume(client, "s1", "msg-two", {"formId": "apr_nope", "decision": "accept"})  # a stray
        await resume(client, "s1", "msg-two", {"formId": "apr_first", "decision": "decline"})
        await _forms(redis, "msg-two", 2)  # the second form is open
        # the user's double tap on the first form arrives late: it must not answer the second
        await resume(client, "s1", "msg-two", {"formId": "apr_first", "decision": "accept"})
        await resume(client, "s1", "msg-two", {"decision": "accept"})  # no formId: never accepts
        await resume(client, "s1", "msg-two", "accept")  # nor does a plain string
        await resume(client, "s1", "msg-two", "decline")  # but it may decline the form it saw
        await read_events(redis, "s1", "msg-two")
        counts = gateway.info["counts"]
    assert runner.decisions == ["decline", "decline"]
    assert counts.get("resume_dropped") == 4, counts


async def test_a_withdrawn_form_is_announced_and_a_resume_for_it_is_dropped(redis_server):
    redis = sdk_redis(redis_server.url)
    client = sdk_client(redis)
    runner = TwoApprovals()
    async with running_gateway(redis_server.url, runner) as gateway:
        await ask(client, "s1", "withdraw", "msg-w")
        await _forms(redis, "msg-w", 1)
        runner.withdraw.set()
        forms = await _forms(redis, "msg-w", 3)  # open, withdrawn, the next one open
        await resume(client, "s1", "msg-w", {"formId": "apr_w", "decision": "accept"})
        await resume(client, "s1", "msg-w", {"formId": "apr_after", "decision": "decline"})
        await read_events(redis, "s1", "msg-w")
        counts = gateway.info["counts"]
    assert [(f["formId"], f["formStatus"]) for f in forms] == [("apr_w", 0), ("apr_w", 2), ("apr_after", 0)]
    assert forms[1]["withdrawReason"] == "resolved"
    assert runner.decisions == ["decline"] and counts.get("resume_dropped") == 1


async def test_a_user_input_form_has_one_field_per_question_and_answers_by_question_id(redis_server):
    redis = sdk_redis(redis_server.url)
    client = sdk_client(redis)
    runner = TwoApprovals()
    async with running_gateway(redis_server.url, runner):
        await ask(client, "s1", "questions", "msg-q")
        (form,) = await _forms(redis, "msg-q", 1)
        await resume(client, "s1", "msg-q", {"formId": "apr_q", "answers": {"db_choice": ["Postgres"]}})
        await read_events(redis, "s1", "msg-q")
    (field,) = form["pluginMachineFields"]
    assert field["fieldCode"] == "db_choice" and field["description"] == "Which database should we use?"
    assert [o["label"] for o in field["options"]] == ["Postgres", "SQLite"]
    assert runner.decisions == [{"answers": {"db_choice": ["Postgres"]}}]


class FormAsker:
    """Asks one MCP form (elicitation) and records the runner's answer."""

    def __init__(self) -> None:
        self.decisions: list[Any] = []

    async def run(self, task: Task, sink: Any, cancel: asyncio.Event) -> TaskResult:
        schema = {"type": "object", "properties": {
            "environment": {"type": "string", "title": "Environment", "enum": ["staging", "production"]}}}
        asked = ApprovalRequest("apr_f", "elicitation", "MCP server deploy asks for input", "low",
                                ("accept", "decline", "cancel"),
                                details={"message": "Where should I deploy?", "mode": "form", "schema": schema})
        self.decisions.append(await sink.request_approval(asked))
        return TaskResult("completed", result_text="ok")


async def test_an_mcp_form_is_a_form_with_its_fields_and_a_resume_fills_them(redis_server):
    redis = sdk_redis(redis_server.url)
    client = sdk_client(redis)
    runner = FormAsker()
    async with running_gateway(redis_server.url, runner):
        await ask(client, "s1", "form", "msg-f")
        (form,) = await _forms(redis, "msg-f", 1)
        await resume(client, "s1", "msg-f", {"formId": "apr_f", "decision": "accept", "environment": "staging"})
        await read_events(redis, "s1", "msg-f")
    assert [f["fieldCode"] for f in form["pluginMachineFields"]] == ["decision", "environment"]
    assert "Where should I deploy?" in form["pluginMachineFields"][0]["description"]
    assert runner.decisions == [{"decision": "accept", "content": {"environment": "staging"}}]
