"""The runner against the real codex app-server and the scripted model.

One AppServer (and one scripted model, one CODEX_HOME) is shared by the module's
tests; each test queues its own model responses and looks only at its own requests.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from boss_agent.demo import scripted_model as sm
from boss_agent.appserver.client import AppServer
from boss_agent.runner import Runner
from boss_agent.runner.policy import recorded_workdir
from boss_agent.tasks import Task
from tests.support.config import make_config
from tests.support.runner import Sink, module_env, sleepers
from tests.support.waits import eventually

pytestmark = [
    pytest.mark.codex, pytest.mark.asyncio(loop_scope="module"),
]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, module_model: sm.ScriptedModel, codex_bin: str) -> dict[str, Any]:
    return module_env(tmp_path_factory.mktemp("runner"), module_model, codex_bin)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def app(env: dict[str, Any]) -> AsyncIterator[AppServer]:
    async with AppServer.from_config(env["config"], codex_home=env["home"]) as server:
        yield server


@pytest.fixture
def runner(env: dict[str, Any], app: AppServer) -> Runner:
    return Runner(env["config"], app, codex_home=env["home"])


def _workdir(env: dict[str, Any], name: str) -> Path:
    path = env["root"] / name
    path.mkdir()
    return path


def _git_repo(path: Path) -> None:
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t", "-C", str(path)]
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    (path / "README").write_text("hello\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)


async def test_a_turn_completes_with_the_final_answer_thread_turn_and_git_facts(
        env: dict[str, Any], runner: Runner, module_model: sm.ScriptedModel) -> None:
    work = _workdir(env, "plain")
    _git_repo(work)
    module_model.enqueue(sm.turn(sm.apply_patch(sm.add_file_patch("report.pdf", ["not really a pdf"]))))
    module_model.enqueue(sm.turn(sm.message("All done. The key is sk-proj-abcdefghijklmnopqrst")))
    sink = Sink()
    result = await runner.run(Task("t-plain", "write the report", workdir=str(work)), sink, asyncio.Event())
    assert result.status == "completed", result
    assert result.backend == "app_server" and result.fallback_from is None
    assert result.result_text and result.result_text.startswith("All done.")
    assert "sk-proj-abcdefghijklmnopqrst" not in result.result_text
    assert result.codex_thread_ref and result.turn_id
    card = result.execution_progress
    assert card["status"] == "completed"
    assert card["branch"]["name"] == "main" and card["branch"]["changedFiles"] == 1
    assert card["branch"]["githubCli"] in ("available", "unauthenticated", "missing")
    assert {"name": "report.pdf", "kind": "document"} in card["artifacts"]
    assert sink.cards and sink.cards[-1] == card
    # The thread lives on: a follow-up task with codexThreadRef resumes it.
    module_model.enqueue(sm.text_reply("second answer"))
    again = await runner.run(Task("t-plain-2", "and now?", workdir=str(work),
                                  codex_thread_ref=result.codex_thread_ref), Sink(), asyncio.Event())
    assert again.status == "completed" and again.result_text == "second answer"
    assert again.codex_thread_ref == result.codex_thread_ref and again.turn_id != result.turn_id
    assert "write the report" in module_model.requests[-1].input_texts()


async def test_the_thread_s_folder_is_on_record_when_the_result_comes_back(
        env: dict[str, Any], runner: Runner, module_model: sm.ScriptedModel) -> None:
    """The link is made in a thread while the turn runs; the result waits for it, so a
    follow-up sent the moment the result arrives finds the folder (new and moved)."""
    first, second = _workdir(env, "record-a"), _workdir(env, "record-b")
    module_model.enqueue(sm.text_reply("one"))
    result = await runner.run(Task("t-record", "hi", workdir=str(first)), Sink(), asyncio.Event())
    assert result.status == "completed" and result.codex_thread_ref
    assert recorded_workdir(env["config"], result.codex_thread_ref) == first
    module_model.enqueue(sm.text_reply("two"))
    moved = await runner.run(Task("t-record-2", "again", workdir=str(second),
                                  codex_thread_ref=result.codex_thread_ref), Sink(), asyncio.Event())
    assert moved.status == "completed"
    assert recorded_workdir(env["config"], result.codex_thread_ref) == second


async def test_a_failed_turn_fails_the_task_with_codex_s_message(
        env: dict[str, Any], runner: Runner, module_model: sm.ScriptedModel) -> None:
    module_model.enqueue(sm.http_error(401, "invalid_api_key", "Incorrect API key provided: sk-proj-abcdefghijklmnop"))
    result = await runner.run(Task("t-fail", "hi", workdir=str(_workdir(env, "fail"))), Sink(), asyncio.Event())
    assert result.status == "failed" and result.error_code == "codex_turn_failed"
    assert result.error_message and "401" in result.error_message
    assert "sk-proj-abcdefghijklmnop" not in json.dumps(result.to_wire())


async def test_a_task_asking_for_more_than_the_device_allows_is_capped_and_the_card_says_so(
        env: dict[str, Any], app: AppServer, module_model: sm.ScriptedModel) -> None:
    config = make_config(env["tmp"], env["config"].codex.bin, **{"codex.max_sandbox": "read-only",
                                                                 "codex.sandbox": "read-only"})
    runner = Runner(config, app, codex_home=env["home"])
    module_model.enqueue(sm.text_reply("capped"))
    result = await runner.run(Task("t-cap", "hi", sandbox="danger-full-access"), Sink(), asyncio.Event())
    assert result.status == "completed"
    assert any("read-only" in w["message"] for w in result.execution_progress["warnings"])
    # The thread really runs read-only: codex tells the model so in its permission context.
    assert any("read-only" in text for text in module_model.requests[-1].input_texts())


def _shell(cmd: str, **extra: Any) -> list[dict[str, Any]]:
    # login=False: a login shell sources ~/.bashrc, which on this box can block on pyenv's rehash lock.
    return sm.shell_call(cmd, login=False, **extra)


def _approval_turn(module_model: sm.ScriptedModel, cmd: str) -> None:
    module_model.enqueue(sm.turn(_shell(cmd)))
    module_model.enqueue(sm.text_reply("after the command"))


async def test_an_accepted_approval_runs_the_command(
        env: dict[str, Any], runner: Runner, module_model: sm.ScriptedModel) -> None:
    work = _workdir(env, "approve")
    _approval_turn(module_model, "touch approved.txt")

    async def accept(_request: Any) -> str:
        return "accept"

    sink = Sink(accept)
    task = Task("t-accept", "make a file", workdir=str(work), approval_policy="untrusted")
    result = await runner.run(task, sink, asyncio.Event())
    assert result.status == "completed", result
    (asked,) = sink.approvals
    # the program may be named (device API §6), its arguments never
    assert asked.kind == "command" and asked.summary == "Run touch (outside the sandbox)"
    assert (work / "approved.txt").exists(), module_model.requests[-1].tool_outputs()
    assert [a["status"] for a in result.execution_progress["approvals"]] == ["accepted"]
    assert any(c["status"] == "waitingApproval" for c in sink.cards)


async def test_a_follow_up_on_a_loaded_thread_gets_its_own_stricter_approval_policy(
        env: dict[str, Any], runner: Runner, module_model: sm.ScriptedModel) -> None:
    """A thread's first task sets the policy at thread/start; a follow-up on the same
    thread, still loaded in the app-server, runs under its own task's policy: the
    runner restates it on turn/start, so a looser earlier task cannot carry over."""
    work = _workdir(env, "follow-up-policy")
    module_model.enqueue(sm.turn(_shell("touch first.txt")))
    module_model.enqueue(sm.text_reply("first done"))
    first_sink = Sink()
    first = await runner.run(Task("t-loose", "first", workdir=str(work), approval_policy="on-request"),
                             first_sink, asyncio.Event())
    assert first.status == "completed" and (work / "first.txt").exists()
    assert first_sink.approvals == []  # on-request: a workspace write runs unasked
    _approval_turn(module_model, "touch second.txt")

    async def decline(_request: Any) -> str:
        return "decline"

    sink = Sink(decline)
    follow_up = Task("t-strict", "second", workdir=str(work), approval_policy="untrusted",
                     codex_thread_ref=first.codex_thread_ref)
    result = await runner.run(follow_up, sink, asyncio.Event())
    assert result.status == "completed", result
    assert [a.kind for a in sink.approvals] == ["command"]  # untrusted: asked
    assert not (work / "second.txt").exists()


async def test_a_declined_approval_does_not_run_the_command(
        env: dict[str, Any], runner: Runner, module_model: sm.ScriptedModel) -> None:
    work = _workdir(env, "decline")
    _approval_turn(module_model, "touch declined.txt")
    sink = Sink()  # declines
    result = await runner.run(Task("t-decline", "x", workdir=str(work), approval_policy="untrusted"),
                              sink, asyncio.Event())
    assert result.status == "completed"
    assert len(sink.approvals) == 1 and not (work / "declined.txt").exists()
    assert [a["status"] for a in result.execution_progress["approvals"]] == ["declined"]
    assert "rejected" in next(iter(module_model.requests[-1].tool_outputs().values()))


async def test_an_unanswered_approval_times_out_as_declined_while_the_card_keeps_flowing(
        env: dict[str, Any], app: AppServer, module_model: sm.ScriptedModel) -> None:
    config = make_config(env["tmp"], env["config"].codex.bin, **{
        "codex.approval_timeout_s": 1, "codex.sandbox": "danger-full-access",
        "codex.max_sandbox": "danger-full-access"})
    runner = Runner(config, app, codex_home=env["home"])
    work = _workdir(env, "timeout")
    _approval_turn(module_model, "touch late.txt")
    never = asyncio.Event()

    async def wait_forever(_request: Any) -> str:
        await never.wait()
        return "accept"

    sink = Sink(wait_forever)
    result = await runner.run(Task("t-timeout", "x", workdir=str(work), approval_policy="untrusted"),
                              sink, asyncio.Event())
    assert result.status == "completed" and not (work / "late.txt").exists()
    assert [a["status"] for a in result.execution_progress["approvals"]] == ["declined"]


async def test_deny_mode_declines_at_once_without_asking(
        env: dict[str, Any], runner: Runner, module_model: sm.ScriptedModel) -> None:
    work = _workdir(env, "deny")
    _approval_turn(module_model, "touch denied.txt")
    sink = Sink()
    task = Task("t-deny", "x", workdir=str(work), approval_policy="untrusted", approval_mode="deny")
    result = await runner.run(task, sink, asyncio.Event())
    assert result.status == "completed" and sink.approvals == [] and not (work / "denied.txt").exists()


async def test_cancel_interrupts_the_turn_and_kills_the_running_command(
        env: dict[str, Any], runner: Runner, module_model: sm.ScriptedModel) -> None:
    work = _workdir(env, "cancel")
    marker = "29.4321"
    module_model.enqueue(sm.turn(_shell(f"sleep {marker}", yield_time_ms=30000)))
    cancel = asyncio.Event()
    sink = Sink()
    async with asyncio.TaskGroup() as tg:
        running = tg.create_task(runner.run(Task("t-cancel", "sleep", workdir=str(work)), sink, cancel))
        await eventually(lambda: sleepers(f"sleep {marker}"))
        cancel.set()
    result = running.result()
    assert result.status == "cancelled" and result.error_code == "cancelled"
    assert sleepers(f"sleep {marker}") == []
    assert result.execution_progress["status"] == "cancelled"


async def test_a_steer_of_a_stale_turn_fails_without_starting_a_turn(
        env: dict[str, Any], runner: Runner, module_model: sm.ScriptedModel) -> None:
    work = _workdir(env, "steer-stale")
    module_model.enqueue(sm.text_reply("first"))
    first = await runner.run(Task("t-s1", "x", workdir=str(work)), Sink(), asyncio.Event())
    before = len(module_model.requests)
    stale = Task("t-s2", "focus", workdir=str(work), codex_thread_ref=first.codex_thread_ref,
                 target_turn_id=first.turn_id)
    result = await runner.run(stale, Sink(), asyncio.Event())
    assert result.status == "failed" and result.error_code == "turn_not_active"
    assert len(module_model.requests) == before


# A steer into a hung response: a codex before 0.169 holds it until the response ends.
@pytest.mark.codex_feature("immediate_steer")
async def test_a_steer_joins_the_active_turn_and_follows_it_to_the_end(
        env: dict[str, Any], runner: Runner, app: AppServer, module_model: sm.ScriptedModel) -> None:
    work = _workdir(env, "steer")
    module_model.enqueue(sm.text_reply("first"))
    first = await runner.run(Task("t-st1", "x", workdir=str(work)), Sink(), asyncio.Event())
    thread = first.codex_thread_ref
    module_model.enqueue(sm.hang(sm.message("partial")))
    module_model.enqueue(sm.text_reply("steered answer"))
    client = await app.client()
    async with asyncio.TaskGroup() as tg:
        original = tg.create_task(runner.run(Task("t-st2", "long job", workdir=str(work),
                                                  codex_thread_ref=thread), Sink(), asyncio.Event()))

        async def active_turn() -> str | None:
            """The hung turn's id, once the model has its request (codex has no event for it)."""
            if len(module_model.requests) < 3:
                return None
            page = await client.thread_turns_list(thread, limit=1, sortDirection="desc")
            turn = (page.get("data") or [{}])[0]
            return turn.get("id") if turn.get("status") == "inProgress" else None

        turn_id = await eventually(active_turn)
        steer = await runner.run(Task("t-st3", "focus on tests", workdir=str(work), codex_thread_ref=thread,
                                      target_turn_id=turn_id), Sink(), asyncio.Event())
    assert steer.status == "completed" and steer.turn_id == turn_id
    assert steer.result_text == "steered answer"
    assert original.result().status == "completed" and original.result().turn_id == turn_id
    assert "focus on tests" in module_model.requests[-1].input_texts()


async def test_collaboration_injects_a_summary_of_the_source_without_its_secrets(
        env: dict[str, Any], runner: Runner, app: AppServer, module_model: sm.ScriptedModel) -> None:
    work = _workdir(env, "collab")
    secret = "DEVELOPER-SECRET-7731"
    client = await app.client()
    source = (await client.thread_start(cwd=str(work), developerInstructions=f"Never say {secret}."))
    source_id = source["thread"]["id"]
    module_model.enqueue(sm.text_reply("Thread A result: 42"))
    answered = await runner.run(Task("t-ca", "compute", workdir=str(work), codex_thread_ref=source_id),
                                Sink(), asyncio.Event())
    assert answered.status == "completed", answered
    assert any(secret in json.dumps(r.body) for r in module_model.requests)  # the secret is really there
    module_model.enqueue(sm.text_reply("target ready"))
    target = await runner.run(Task("t-cb", "hello", workdir=str(work)), Sink(), asyncio.Event())
    module_model.enqueue(sm.text_reply("used the summary"))
    collab = Task("t-cc", "continue with the other thread's result", intent="thread_collaboration",
                  workdir=str(work), source_thread_ref=source_id, target_thread_ref=target.codex_thread_ref)
    result = await runner.run(collab, Sink(), asyncio.Event())
    assert result.status == "completed", result
    assert result.result_text == "used the summary"
    assert result.codex_thread_ref == target.codex_thread_ref
    request = module_model.requests[-1]
    texts = request.input_texts()
    assert any("Thread A result: 42" in t for t in texts)
    assert texts[-1] == "continue with the other thread's result"
    assert secret not in json.dumps(request.body)
    assert "compute" not in texts  # the source's prompt is not shared either


async def test_a_workdir_outside_the_workspaces_fails_and_nothing_runs(
        env: dict[str, Any], runner: Runner, module_model: sm.ScriptedModel) -> None:
    before = len(module_model.requests)
    sink = Sink()
    result = await runner.run(Task("t-etc", "x", workdir="../../etc"), sink, asyncio.Event())
    assert result.status == "failed" and result.error_code == "workdir_not_allowed"
    assert result.codex_thread_ref is None and len(module_model.requests) == before
    assert result.execution_progress["status"] == "failed"


async def test_capabilities_report_codex_exec_and_the_cua_driver(runner: Runner, codex_release: str) -> None:
    caps = runner.capabilities
    assert caps["codexExec"]["available"] is True and caps["codexExec"]["version"] == codex_release
    assert set(caps["computerUse"]) == {"codex", "cuaDriver"}
    assert caps["computerUse"]["cuaDriver"]["available"] is True


async def test_cancel_while_an_approval_is_pending_cancels_the_task_and_the_approval(
        env: dict[str, Any], runner: Runner, module_model: sm.ScriptedModel) -> None:
    work = _workdir(env, "cancel-approval")
    module_model.enqueue(sm.turn(_shell("touch never.txt")))
    cancel = asyncio.Event()

    async def cancel_instead(_request: Any) -> str:
        cancel.set()  # the user cancels the task rather than answering
        await asyncio.Event().wait()  # never decides; the runner must stop waiting
        return "accept"

    before = len(module_model.requests)
    result = await runner.run(Task("t-cancel-approval", "x", workdir=str(work), approval_policy="untrusted"),
                              Sink(cancel_instead), cancel)
    assert result.status == "cancelled" and not (work / "never.txt").exists()
    assert [a["status"] for a in result.execution_progress["approvals"]] == ["cancelled"]
    assert len(module_model.requests) == before + 1  # the interrupted turn asked the model nothing more


def _sandbox_mode(request: sm.RecordedRequest) -> str:
    """The sandbox codex itself says the turn runs under (its turn metadata header)."""
    return str(json.loads(request.headers["x-codex-turn-metadata"])["sandbox_mode"])


async def test_a_follow_up_on_a_loaded_thread_runs_in_its_own_workdir_under_its_own_sandbox(
        env: dict[str, Any], runner: Runner, module_model: sm.ScriptedModel, outside_tmp: Path) -> None:
    """Codex keeps a loaded thread's cwd and sandbox: the thread's first task ran in
    ``a`` with full access; a follow-up naming ``b`` and workspace-write runs in ``b``
    (a relative write lands there) and can no longer write outside its workspace."""
    first_dir, second_dir = _workdir(env, "own-workdir-a"), _workdir(env, "own-workdir-b")
    module_model.enqueue(sm.turn(_shell(f"touch first.txt {outside_tmp}/first.txt")))
    module_model.enqueue(sm.text_reply("first done"))
    first = await runner.run(Task("t-wd-1", "first", workdir=str(first_dir), sandbox="danger-full-access"),
                             Sink(), asyncio.Event())
    assert first.status == "completed" and (outside_tmp / "first.txt").exists()  # full access
    module_model.enqueue(sm.turn(_shell(f"touch here.txt; touch {outside_tmp}/second.txt")))
    module_model.enqueue(sm.text_reply("second done"))
    follow_up = Task("t-wd-2", "second", workdir=str(second_dir), sandbox="workspace-write",
                     codex_thread_ref=first.codex_thread_ref)
    result = await runner.run(follow_up, Sink(), asyncio.Event())
    assert result.status == "completed", result
    assert (second_dir / "here.txt").exists(), module_model.requests[-1].tool_outputs()
    assert not (first_dir / "here.txt").exists()
    assert not (outside_tmp / "second.txt").exists(), module_model.requests[-1].tool_outputs()
    assert _sandbox_mode(module_model.requests[-1]) == "workspace-write"
    assert result.execution_progress["threadSettings"]["sandbox"] == "workspace-write"


async def test_a_collaboration_s_target_turn_runs_under_its_own_task_s_limits(
        env: dict[str, Any], runner: Runner, module_model: sm.ScriptedModel, outside_tmp: Path) -> None:
    """The target thread began with full access; the collaboration task asks for
    read-only, and the turn it starts on the (loaded) target thread writes nothing."""
    work = _workdir(env, "collab-limits")
    module_model.enqueue(sm.text_reply("Source result: 7"))
    source = await runner.run(Task("t-cl-src", "compute", workdir=str(work)), Sink(), asyncio.Event())
    module_model.enqueue(sm.turn(_shell(f"touch {outside_tmp}/target-1.txt")), sm.text_reply("target ready"))
    target = await runner.run(Task("t-cl-tgt", "hello", workdir=str(work), sandbox="danger-full-access"),
                              Sink(), asyncio.Event())
    assert (outside_tmp / "target-1.txt").exists()
    module_model.enqueue(sm.turn(_shell(f"touch {outside_tmp}/target-2.txt local.txt")), sm.text_reply("done"))
    collab = Task("t-cl", "use the other thread's result", intent="thread_collaboration", workdir=str(work),
                  sandbox="read-only", source_thread_ref=source.codex_thread_ref,
                  target_thread_ref=target.codex_thread_ref)
    result = await runner.run(collab, Sink(), asyncio.Event())
    output = list(module_model.requests[-1].tool_outputs().values())[-1]
    assert result.status == "completed", result
    assert not (outside_tmp / "target-2.txt").exists() and not (work / "local.txt").exists(), output
    assert _sandbox_mode(module_model.requests[-1]) == "read-only"
    assert result.execution_progress["threadSettings"]["sandbox"] == "read-only"
