"""The userInput kind on real codex: Plan mode's ``request_user_input`` answered by the person.

The scripted model calls ``request_user_input`` in a Plan-mode turn; codex sends
``item/tool/requestUserInput`` and hands the model whatever the client answered.
Before the fix a task could not run in Plan mode, the questions' answers did not
reach codex in its shape, and a gateway RESUME sent ``{"user_input": …}``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from boss_agent.demo import scripted_model as sm
from tests.approvals_support import daemon_on_codex

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
