"""The userInput kind on real codex: Plan mode's ``request_user_input`` answered by the person.

The scripted model calls ``request_user_input`` in a Plan-mode turn; codex sends
``item/tool/requestUserInput`` and hands the model whatever the client answered.
Before the fix a task could not run in Plan mode, the questions' answers did not
reach codex in its shape, and a gateway RESUME sent ``{"user_input": …}``.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import httpx
import pytest
from rich.console import Console

from boss_agent.cli.task_follow import submit_and_follow
from boss_agent.controlplane import LocalClient
from boss_agent.demo import scripted_model as sm
from tests.support.approvals import daemon_on_codex, first_form, gateway_on_codex
from tests.support.gateway import ask, read_events, resume, sdk_client, sdk_redis

pytestmark = pytest.mark.codex

QUESTIONS = [{"id": "db_choice", "header": "Database", "question": "Which database should we use?",
              "options": [{"label": "Postgres (Recommended)", "description": "Robust default."},
                          {"label": "SQLite", "description": "Zero setup."}]}]


def ask_questions(model: sm.ScriptedModel) -> None:
    model.enqueue(sm.turn(sm.function_call("request_user_input", {"questions": QUESTIONS}, "call_ui")),
                  sm.text_reply("plan: use the chosen database"))


def answer_codex_got(model: sm.ScriptedModel) -> dict:
    return json.loads(model.requests[-1].tool_outputs()["call_ui"])


async def test_plan_mode_questions_are_answered_on_the_local_control_plane(
        tmp_path: Path, codex_bin: str, codex_home: Path, workdir: Path,
        scripted_model: sm.ScriptedModel) -> None:
    ask_questions(scripted_model)
    async with daemon_on_codex(tmp_path, codex_bin, codex_home) as boss:
        task_id = boss.cp.submit_task("plan the storage", workdir=str(workdir), collaborationMode="plan")
        approval = await boss.first_approval(task_id)
        answered = await boss.decide(task_id, approval["approvalId"], {"answers": {"db_choice": ["SQLite"]}})
        assert answered.status_code == 200, answered.text
        view = await boss.finished(task_id)
    assert approval["kind"] == "userInput"
    (question,) = approval["questions"]
    assert question["id"] == "db_choice" and question["question"] == "Which database should we use?"
    assert [o["label"] for o in question["options"]] == ["Postgres (Recommended)", "SQLite"]
    assert question["allowOther"] is True and question["secret"] is False
    assert view["result"]["status"] == "completed", view["result"]
    assert answer_codex_got(scripted_model) == {"answers": {"db_choice": {"answers": ["SQLite"]}}}


@pytest.mark.redis
async def test_plan_mode_questions_are_answered_by_a_gateway_resume_by_form_and_question_id(
        tmp_path: Path, codex_bin: str, codex_home: Path, workdir: Path,
        scripted_model: sm.ScriptedModel, redis_server) -> None:
    ask_questions(scripted_model)
    redis = sdk_redis(redis_server.url)
    client = sdk_client(redis)
    async with gateway_on_codex(tmp_path, codex_bin, codex_home, workdir, redis_server.url):
        await ask(client, "s-ui", "plan the storage", "msg-ui",
                  extra_payload={"workdir": str(workdir), "collaborationMode": "plan"})
        form = await first_form(redis, "s-ui", "msg-ui")
        await resume(client, "s-ui", "msg-ui", {"formId": form["formId"],
                                                "answers": {"db_choice": ["Postgres (Recommended)"]}})
        await read_events(redis, "s-ui", "msg-ui", timeout=60)
    await redis.aclose()
    (field,) = form["pluginMachineFields"]
    assert field["fieldCode"] == "db_choice" and field["description"] == "Which database should we use?"
    assert answer_codex_got(scripted_model) == {"answers": {"db_choice": {"answers": ["Postgres (Recommended)"]}}}


TOKEN = "ghp_" + "R8q" * 12  # a secret Codex might quote in its stated reason


async def test_a_command_approval_names_its_program_and_keeps_its_arguments_to_the_detail(
        tmp_path: Path, codex_bin: str, codex_home: Path, workdir: Path,
        scripted_model: sm.ScriptedModel) -> None:
    scripted_model.enqueue(
        sm.turn(sm.shell_call("pytest -q --deselect ARGCANARY", sandbox_permissions="require_escalated",
                              justification=f"run the suite; it needs {TOKEN} " + "x" * 300)),
        sm.text_reply("declined, fine"))
    async with daemon_on_codex(tmp_path, codex_bin, codex_home) as boss:
        task_id = boss.cp.submit_task("test it", workdir=str(workdir), approvalPolicy="on-request",
                                      sandbox="workspace-write")
        approval = await boss.first_approval(task_id)
        await boss.decide(task_id, approval["approvalId"], "decline")
        view = await boss.finished(task_id)
    assert approval["summary"] == "Run pytest (outside the sandbox)"
    assert approval["reason"].startswith("run the suite; it needs ") and len(approval["reason"]) <= 200
    assert approval["detail"]["command"].endswith("pytest -q --deselect ARGCANARY'")  # what is decided on
    # Once decided the detail is gone: the task's view and its card keep the summary only.
    assert TOKEN not in json.dumps(view) and "ARGCANARY" not in json.dumps(view)


def permissions_home(tmp_path: Path, model: sm.ScriptedModel) -> Path:
    return sm.write_codex_home(tmp_path / "codex-home-perm", model.base_url,
                               features={"request_permissions_tool": True})


@pytest.mark.parametrize("decision", ["accept", "decline"])
async def test_a_permissions_request_says_what_is_asked_and_the_decision_reaches_codex(
        tmp_path: Path, codex_bin: str, workdir: Path, decision: str) -> None:
    asked = {"network": {"enabled": True}, "file_system": {"write": [str(workdir / "out")]}}
    with sm.ScriptedModel() as model:
        model.enqueue(sm.turn(sm.function_call("request_permissions",
                                               {"permissions": asked, "reason": "fetch the deps"},
                                               "call_perm")),
                      sm.text_reply("ok"))
        async with daemon_on_codex(tmp_path, codex_bin, permissions_home(tmp_path, model)) as boss:
            task_id = boss.cp.submit_task("get deps", workdir=str(workdir), approvalPolicy="on-request",
                                          sandbox="workspace-write")
            approval = await boss.first_approval(task_id)
            answer = await boss.decide(task_id, approval["approvalId"], decision)
            assert answer.status_code == 200, answer.text
            view = await boss.finished(task_id)
        granted = json.loads(model.requests[-1].tool_outputs()["call_perm"])
    assert approval["kind"] == "permissions" and approval["reason"] == "fetch the deps"
    assert approval["permissions"] == ["network access", "write: out"]
    assert str(workdir) not in json.dumps(approval)
    assert view["result"]["status"] == "completed"
    assert granted["scope"] == "turn"
    if decision == "accept":
        assert granted["permissions"]["network"] == {"enabled": True}
    else:
        assert granted["permissions"] == {"network": None, "file_system": None}


ELICIT_SERVER = Path(__file__).resolve().parents[2] / "fixtures" / "elicit_mcp.py"


def elicitation_home(tmp_path: Path, model: sm.ScriptedModel) -> Path:
    """An unknown slug lists MCP tools directly (namespace ``mcp__elicit``), no tool search."""
    extra = f'[mcp_servers.elicit]\ncommand = "{sys.executable}"\nargs = ["{ELICIT_SERVER}"]\n'
    return sm.write_codex_home(tmp_path / "codex-home-mcp", model.base_url, model="mock-model",
                               extra_toml=extra)


@pytest.mark.parametrize("mode", ["form", "url"])
async def test_an_mcp_elicitation_reaches_the_person_with_its_message_and_form_or_url(
        tmp_path: Path, codex_bin: str, workdir: Path, mode: str) -> None:
    with sm.ScriptedModel() as model:
        model.enqueue(sm.turn(sm.function_call(f"ask_{mode}", {}, "call_mcp", namespace="mcp__elicit")),
                      sm.text_reply("deployed"))
        async with daemon_on_codex(tmp_path, codex_bin, elicitation_home(tmp_path, model)) as boss:
            task_id = boss.cp.submit_task("deploy", workdir=str(workdir), approvalPolicy="on-request")
            tool_call = await boss.first_approval(task_id)  # codex asks before an MCP tool runs
            assert (await boss.decide(task_id, tool_call["approvalId"], "accept")).status_code == 200
            await boss.until(lambda: len(boss.task(task_id)["approvals"]) >= 2)
            elicitation = boss.task(task_id)["approvals"][1]
            content = {"environment": "staging"} if mode == "form" else None
            decided = await boss.decide(task_id, elicitation["approvalId"], "accept") if content is None \
                else await _decide_form(boss, task_id, elicitation["approvalId"], content)
            assert decided.status_code == 200, decided.text
            view = await boss.finished(task_id)
        server_got = model.requests[-1].tool_outputs()["call_mcp"]
    assert tool_call["kind"] == "tool" and tool_call["summary"] == "Use the elicit tool ask_" + mode
    assert tool_call["detail"] == {"server": "elicit", "tool": "ask_" + mode, "arguments": {}}
    assert elicitation["kind"] == "elicitation" and elicitation["mode"] == mode
    if mode == "form":
        assert elicitation["message"] == "Where should I deploy?"
        assert elicitation["schema"]["properties"]["environment"]["enum"] == ["staging", "production"]
        assert '\\"content\\": {\\"environment\\": \\"staging\\"}' in server_got
    else:
        assert elicitation["message"] == "Sign in to the registry"
        assert elicitation["url"].startswith("https://registry.example/login")
        assert '\\"action\\": \\"accept\\"' in server_got
    assert view["result"]["status"] == "completed"
    card = view["executionProgress"]
    assert [(t["kind"], t["name"]) for t in card["toolActivities"]] == [("mcpToolCall", f"elicit/ask_{mode}")], card


async def _decide_form(boss, task_id: str, approval_id: str, content: dict):
    async with httpx.AsyncClient(base_url=boss.cp.url) as local:
        return await local.post(f"/api/local/approvals/{task_id}/{approval_id}",
                                json={"decision": "accept", "content": content},
                                headers={"Authorization": f"Bearer {boss.cp.secret}"})


class ScriptedTerminal(Console):
    """The person at the terminal: answers the prompts from a list (no human can be driven)."""

    def __init__(self, answers: list[str]) -> None:
        super().__init__(file=io.StringIO(), width=120)
        self.answers = list(answers)
        self.secret_prompts: list[str] = []

    def input(self, prompt: str = "", *, password: bool = False, **_kwargs: object) -> str:
        if password:
            self.secret_prompts.append(prompt)
        return self.answers.pop(0)


async def test_plan_mode_questions_are_answered_at_the_boss_agent_task_prompt(
        tmp_path: Path, codex_bin: str, codex_home: Path, workdir: Path,
        scripted_model: sm.ScriptedModel) -> None:
    ask_questions(scripted_model)
    terminal = ScriptedTerminal(["2"])  # the second option, SQLite
    async with daemon_on_codex(tmp_path, codex_bin, codex_home) as boss:
        async with LocalClient(boss.cp.url, boss.cp.secret) as client:
            _, status = await submit_and_follow(
                client, "plan the storage", {"workdir": str(workdir), "collaborationMode": "plan"},
                follow=True, console=terminal, interactive=True)
    assert status == "completed"
    assert answer_codex_got(scripted_model) == {"answers": {"db_choice": {"answers": ["SQLite"]}}}
    assert "Which database should we use?" in terminal.file.getvalue()
