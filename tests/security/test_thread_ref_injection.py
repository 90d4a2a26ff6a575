"""Finding 1: a thread ref is data, never a codex command-line option.

A ``codexThreadRef`` of ``--dangerously-bypass-approvals-and-sandbox`` once went
straight into ``codex exec resume <ref>`` and turned a read-only task into one with
no sandbox and no approvals. Refs are now validated where every source parses its
task, and every codex argv puts positionals after ``--``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from boss_agent.codexbin import CodexBinary
from boss_agent.demo import scripted_model as sm
from boss_agent.errors import TaskRejected
from boss_agent.runner import Runner, cua
from boss_agent.runner.context import RunContext
from boss_agent.runner.exec_backend import exec_argv
from boss_agent.runner.feed import CardFeed
from boss_agent.runner.policy import resolve_policy
from boss_agent.tasks import Task
from tests.support.config import make_config
from tests.support.runner import Sink
from tests.support.runner import missing_app_server
from tests.support.security import hostile

pytestmark = [pytest.mark.codex]

BYPASS = "--dangerously-bypass-approvals-and-sandbox"


async def test_an_option_as_thread_ref_fails_the_task_before_codex_runs_anything(
        tmp_path: Path, codex_bin: str, codex_home: Path, scripted_model: sm.ScriptedModel) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    marker = outside / "pwned"
    config = make_config(tmp_path, codex_bin, **{"codex.approval_policy": "never",
                                                 "codex.max_approval_policy": "never"})
    scripted_model.enqueue(sm.turn(sm.shell_call(f"touch {marker}")))
    scripted_model.enqueue(sm.text_reply("done"))
    try:
        task = hostile(codexThreadRef=BYPASS, sandbox="read-only", approvalPolicy="never")
    except TaskRejected as exc:  # refused where the source parses it: the source fails the task
        assert exc.code == "invalid_thread_ref"
        task = None
    if task is not None:  # parsed: the runner must refuse it before anything runs
        async with missing_app_server(tmp_path, codex_bin) as app:
            result = await Runner(config, app, codex_home=codex_home).run(task, Sink(), asyncio.Event())
        assert result.status == "failed" and result.error_code == "invalid_thread_ref"
    assert not marker.exists()
    assert scripted_model.requests == []


@pytest.mark.parametrize("field", ["codexThreadRef", "sourceCodexThreadRef", "targetCodexThreadRef",
                                   "targetCodexTurnId"])
@pytest.mark.parametrize("ref", [BYPASS, "-c", "a b", "../x", "x\n--yolo", "ä", "x" * 129, " "])
def test_every_ref_field_refuses_anything_but_an_id_or_a_plain_name(field: str, ref: str) -> None:
    with pytest.raises(TaskRejected) as caught:
        hostile(**{field: ref, "intentCategory": "conversation_reply"})
    assert caught.value.code == "invalid_thread_ref"


@pytest.mark.parametrize("ref", ["019a229b-ab1b-7c33-9a1f-7f0e5a3c2e11", "release-notes-thread",
                                 "team:ops.v2_x", "A" * 128])
def test_a_codex_id_or_a_plain_thread_name_is_accepted(ref: str) -> None:
    assert hostile(codexThreadRef=ref).codex_thread_ref == ref


def test_the_exec_argv_puts_every_positional_after_a_double_dash(tmp_path: Path, codex_bin: str) -> None:
    config = make_config(tmp_path, codex_bin)
    task = hostile(codexThreadRef="release-notes-thread", model="gpt-5.5")
    ctx = RunContext(task, config, Sink(), asyncio.Event(), tmp_path, resolve_policy(task, config),
                     CardFeed(Sink(), backend="exec", workdir=str(tmp_path)),
                     thread_id=task.codex_thread_ref)
    argv = exec_argv(CodexBinary("codex", ("codex",), {}), ctx)
    split = argv.index("--")
    assert argv[split + 1:] == ["release-notes-thread", "-"]
    assert "--model=gpt-5.5" in argv[:split]  # a value glued to its option cannot become one


def test_the_exec_argv_with_the_cua_server_keeps_its_overrides_before_the_double_dash(
        tmp_path: Path, codex_bin: str) -> None:
    config = make_config(tmp_path, codex_bin)
    task = hostile(codexThreadRef="019a229b-ab1b-7c33-9a1f-7f0e5a3c2e11", intentCategory="computer_use")
    ctx = RunContext(task, config, Sink(), asyncio.Event(), tmp_path, resolve_policy(task, config),
                     CardFeed(Sink(), backend="exec", workdir=str(tmp_path)),
                     thread_id=task.codex_thread_ref)
    overrides = cua.exec_overrides("/opt/cua-driver")
    argv = exec_argv(CodexBinary("codex", ("codex",), {}), ctx, overrides)
    split = argv.index("--")
    assert argv[split + 1:] == ["019a229b-ab1b-7c33-9a1f-7f0e5a3c2e11", "-"]
    for override in overrides:  # each one is the value of its own -c, before the --
        assert argv[argv.index(override) - 1] == "-c" and argv.index(override) < split


async def test_the_runner_refuses_a_bad_ref_however_the_task_was_built(
        tmp_path: Path, codex_bin: str, codex_home: Path, scripted_model: sm.ScriptedModel) -> None:
    config = make_config(tmp_path, codex_bin)
    async with missing_app_server(tmp_path, codex_bin) as app:
        result = await Runner(config, app, codex_home=codex_home).run(
            Task("t-direct", "x", codex_thread_ref=BYPASS), Sink(), asyncio.Event())
    assert result.status == "failed" and result.error_code == "invalid_thread_ref"
    assert scripted_model.requests == []
