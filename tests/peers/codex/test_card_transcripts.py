"""The card, built from transcripts the real codex binary emits, field by field.

One ``codex app-server`` and one scripted model serve the whole module (the machine has
two cores); every scenario runs on its own thread. Transcripts are recorded at test
time, so a codex upgrade that changes its messages shows up here, not in production.

Canaries are planted in what the model says (answer, plan, reasoning), in the commands
it runs, in file contents and in raw reasoning. Secret-shaped canaries may reach the
card only masked; plain canaries (command text, output, file content, raw reasoning,
web queries) must not reach it at all, and neither may any id or the workdir path.

Commands run with ``login: false`` (``bash -c``): a login shell sources the machine's
profile, which on a shared box can stall for a minute (a stale pyenv rehash lock did)
and would turn these tests into a measure of someone's dotfiles.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from boss_agent.demo import scripted_model as sm
from boss_agent.codexbin import child_environment, resolve_native
from boss_agent.progress.card import Card, final_answer, new_card
from boss_agent.progress.reducer import reduce, reduce_exec_event
from tests.support.codex_raw import RawCodex, is_turn_completed, method_is

pytestmark = pytest.mark.codex

EXEC_TIMEOUT_S = 60  # `codex exec` is ~0.6 s per model call here; a loaded box is much slower
SECRET = "sk-proj-SECRETCANARY0123456789"  # secret-shaped: allowed fields show it masked
PLAIN = ("CMDCANARY", "OUTCANARY", "FILECANARY", "RAWCANARY", "QUERYCANARY")  # never on the card


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("work")


@pytest.fixture(scope="module")
def home(module_model: sm.ScriptedModel, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sm.write_codex_home(tmp_path_factory.mktemp("codex-home"), module_model.base_url)


@pytest.fixture(scope="module")
def codex(codex_bin: str, home: Path, workdir: Path) -> Iterator[RawCodex]:
    client = RawCodex(codex_bin, home, workdir).start()
    try:
        yield client
    finally:
        client.close()


def card_of(transcript: list[dict[str, Any]], workdir: Path) -> Card:
    card = new_card(workdir=str(workdir), now="2026-11-30T00:00:00Z")
    for message in transcript:
        card = reduce(card, message)
    return card


def assert_no_leak(card: Card, transcript: list[dict[str, Any]], workdir: Path) -> dict[str, Any]:
    """Nothing planted, no id and no absolute workdir/home path in the serialized card."""
    text = json.dumps(card.to_dict()) + repr(card)
    for canary in PLAIN + ("SECRETCANARY",):
        assert canary not in text
    assert str(workdir) not in text and os.path.expanduser("~") + "/" not in text
    ids = {m["params"].get(k) for m in transcript for k in ("threadId", "turnId", "itemId")
           if isinstance(m.get("params"), dict)}
    ids |= {m["params"]["item"]["id"] for m in transcript
            if isinstance(m.get("params"), dict) and isinstance(m["params"].get("item"), dict)}
    for value in ids - {None}:
        assert str(value) not in text, "a codex id reached the card"
    return card.to_dict()


def methods(transcript: list[dict[str, Any]]) -> list[str]:
    return [m["method"] for m in transcript]


def test_a_plain_streamed_reply_becomes_the_answer_preview_and_the_final_answer(
        codex: RawCodex, module_model: sm.ScriptedModel, workdir: Path) -> None:
    text = f"Hello! Your key {SECRET} is set, see {workdir}/notes.txt."
    module_model.enqueue(sm.turn(sm.message(text, [text[:10], text[10:30], text[30:]])))
    thread = codex.start_thread(workdir)
    transcript = codex.run_turn(thread, "say hello")
    card = card_of(transcript, workdir)
    out = assert_no_leak(card, transcript, workdir)
    assert methods(transcript).count("item/agentMessage/delta") == 3
    assert out["status"] == "running"
    assert out["answerPreview"] == "Hello! Your key [redacted] is set, see notes.txt."
    assert final_answer(card) == out["answerPreview"]
    assert out["tokenUsage"]["totalTokens"] == 15 and out["tokenUsage"]["contextWindow"] > 0
    assert out["threadStatus"] == {"state": "idle", "waitingOnApproval": False,
                                   "waitingOnUserInput": False}
    assert out["toolActivities"] == [] and out["approvals"] == [] and card.ignored_count == 0


def test_an_update_plan_call_becomes_the_steps_with_their_statuses(
        codex: RawCodex, module_model: sm.ScriptedModel, workdir: Path) -> None:
    module_model.enqueue(
        sm.turn(sm.update_plan([(f"Inspect repo ({SECRET})", "completed"), ("Write code", "in_progress"),
                                ("Run tests", "pending")], explanation="Starting work")),
        sm.turn(sm.message("Planned.")))
    thread = codex.start_thread(workdir)
    transcript = codex.run_turn(thread, "plan it")
    out = assert_no_leak(card_of(transcript, workdir), transcript, workdir)
    assert "turn/plan/updated" in methods(transcript)
    assert out["steps"] == [{"title": "Inspect repo ([redacted])", "status": "completed"},
                            {"title": "Write code", "status": "inProgress"},
                            {"title": "Run tests", "status": "pending"}]


def test_a_failing_shell_command_shows_its_exit_code_but_not_its_text_or_output(
        codex: RawCodex, module_model: sm.ScriptedModel, workdir: Path) -> None:
    cmd = "printf 'OUTCANARY\\n'; echo CMDCANARY >&2; exit 3"
    module_model.enqueue(sm.turn(sm.shell_call(cmd, workdir=str(workdir), login=False)),
                         sm.turn(sm.message("It failed.")))
    thread = codex.start_thread(workdir)
    transcript = codex.run_turn(thread, "run it")
    assert "OUTCANARY" in json.dumps(transcript)  # codex did report the output (aggregatedOutput)
    out = assert_no_leak(card_of(transcript, workdir), transcript, workdir)
    assert out["toolActivities"] == [{"kind": "commandExecution", "name": "shell", "status": "failed",
                                      "summary": "ran a command (exit 3)"}]


def test_apply_patch_add_and_update_become_relative_file_changes_and_branch_counts(
        codex: RawCodex, module_model: sm.ScriptedModel, workdir: Path) -> None:
    add = sm.add_file_patch("docs/report.pdf", ["FILECANARY one", "two"])
    update = "*** Begin Patch\n*** Update File: docs/report.pdf\n@@\n FILECANARY one\n-two\n+three\n*** End Patch\n"
    module_model.enqueue(sm.turn(sm.apply_patch(add)), sm.turn(sm.apply_patch(update)),
                  sm.turn(sm.message("Patched.")))
    thread = codex.start_thread(workdir)
    transcript = codex.run_turn(thread, "patch it")
    assert "turn/diff/updated" in methods(transcript)
    out = assert_no_leak(card_of(transcript, workdir), transcript, workdir)
    assert out["fileChanges"] == [{"path": "docs/report.pdf", "change": "update"}]
    assert (out["branch"]["changedFiles"], out["branch"]["insertions"], out["branch"]["deletions"]) == (1, 2, 0)
    assert out["artifacts"] == [{"name": "report.pdf", "kind": "document"}]
    assert [a["status"] for a in out["toolActivities"]] == []


def test_untrusted_approvals_accepted_and_declined_are_one_entry_per_request(
        codex: RawCodex, module_model: sm.ScriptedModel, workdir: Path) -> None:
    module_model.enqueue(
        sm.turn(sm.shell_call("touch approved-CMDCANARY.txt && echo created", workdir=str(workdir), login=False)),
        sm.turn(sm.apply_patch(sm.add_file_patch("accepted.txt", ["FILECANARY"]))),
        sm.turn(sm.shell_call("touch declined-CMDCANARY.txt", workdir=str(workdir), login=False)),
        sm.turn(sm.message("Done with approvals.")))
    thread = codex.start_thread(workdir, approvalPolicy="untrusted")
    answers = iter(["accept", "accept", "decline"])
    transcript = codex.run_turn(thread, "needs approval", lambda _r: {"decision": next(answers)})
    requests = [m["method"] for m in transcript if "id" in m]
    assert requests == ["item/commandExecution/requestApproval", "item/fileChange/requestApproval",
                        "item/commandExecution/requestApproval"]
    assert methods(transcript).count("serverRequest/resolved") == 3
    out = assert_no_leak(card_of(transcript, workdir), transcript, workdir)
    assert [(a["kind"], a["status"]) for a in out["approvals"]] == [
        ("command", "accepted"), ("fileChange", "accepted"), ("command", "declined")]
    assert out["approvals"][0]["summary"] == "Run 2 commands: touch, echo (outside the sandbox)"  # programs only
    assert out["approvals"][1]["summary"] == "Edit 1 file: accepted.txt"
    assert len({a["id"] for a in out["approvals"]}) == 3
    assert [a["summary"] for a in out["toolActivities"]] == ["ran a command (exit 0)", "command declined"]
    assert out["status"] == "running"


def test_an_unanswered_approval_is_cancelled_by_interrupt_even_when_resolved_comes_late(
        codex: RawCodex, module_model: sm.ScriptedModel, workdir: Path) -> None:
    module_model.enqueue(sm.turn(sm.shell_call("touch never-CMDCANARY.txt", workdir=str(workdir), login=False)))
    thread = codex.start_thread(workdir, approvalPolicy="untrusted")
    turn = codex.request("turn/start", {"threadId": thread, "input": [{"type": "text", "text": "x"}]})
    pending = codex.record(thread, lambda m: "id" in m, answer=None)
    waiting = card_of(pending, workdir)
    assert waiting.status == "waitingApproval" and waiting.approvals[0].status == "pending"
    codex.request("turn/interrupt", {"threadId": thread, "turnId": turn["turn"]["id"]})
    rest = codex.record(thread, method_is("serverRequest/resolved"))
    transcript = pending + rest
    assert methods(rest).index("turn/completed") < methods(rest).index("serverRequest/resolved")
    out = assert_no_leak(card_of(transcript, workdir), transcript, workdir)
    assert [(a["kind"], a["status"]) for a in out["approvals"]] == [("command", "cancelled")]
    assert out["toolActivities"][0]["status"] == "interrupted"
    assert out["status"] == "running"


def test_reasoning_shows_the_summary_and_never_the_raw_thoughts(
        codex: RawCodex, module_model: sm.ScriptedModel, workdir: Path) -> None:
    module_model.enqueue(sm.turn(sm.reasoning([f"**Planning** with {SECRET}", "Second section"],
                                       raw=["RAWCANARY thought 1 ", "RAWCANARY thought 2"]),
                          sm.message("Reasoned.")))
    thread = codex.start_thread(workdir)
    transcript = codex.run_turn(thread, "think")
    assert "item/reasoning/textDelta" in methods(transcript)
    out = assert_no_leak(card_of(transcript, workdir), transcript, workdir)
    assert out["reasoningSummary"] == {"text": "**Planning** with [redacted]\n\nSecond section",
                                       "status": "completed"}


def test_a_web_search_is_a_tool_activity_without_its_query(
        codex: RawCodex, module_model: sm.ScriptedModel, workdir: Path) -> None:
    module_model.enqueue(sm.turn(sm.web_search("QUERYCANARY codex"), sm.message("Searched.")))
    thread = codex.start_thread(workdir)
    transcript = codex.run_turn(thread, "search")
    out = assert_no_leak(card_of(transcript, workdir), transcript, workdir)
    assert out["toolActivities"] == [{"kind": "webSearch", "name": "web_search", "status": "completed",
                                      "summary": "web search"}]


def test_an_interrupted_stream_leaves_the_partial_answer_and_no_open_items(
        codex: RawCodex, module_model: sm.ScriptedModel, workdir: Path) -> None:
    module_model.enqueue(sm.hang(sm.message("Partial answer", ["Partial ", "answer"])))
    thread = codex.start_thread(workdir)
    turn = codex.request("turn/start", {"threadId": thread, "input": [{"type": "text", "text": "go"}]})
    head = codex.record(thread, method_is("item/agentMessage/delta"))
    codex.request("turn/interrupt", {"threadId": thread, "turnId": turn["turn"]["id"]})
    transcript = head + codex.record(thread, is_turn_completed)
    assert transcript[-1]["params"]["turn"]["status"] == "interrupted"
    card = card_of(transcript, workdir)
    assert card.open_items == ()
    out = assert_no_leak(card, transcript, workdir)
    assert out["answerPreview"].startswith("Partial")


def test_a_steer_replaces_the_abandoned_answer_with_the_steered_one(
        codex: RawCodex, module_model: sm.ScriptedModel, workdir: Path) -> None:
    module_model.enqueue(sm.hang(sm.message("Abandoned", ["Aband", "oned"])),
                  sm.turn(sm.message("Tests first, done.")))
    thread = codex.start_thread(workdir)
    turn = codex.request("turn/start", {"threadId": thread, "input": [{"type": "text", "text": "do it"}]})
    head = codex.record(thread, method_is("item/agentMessage/delta"))
    codex.request("turn/steer", {"threadId": thread, "expectedTurnId": turn["turn"]["id"],
                                 "input": [{"type": "text", "text": "Actually focus on tests."}]})
    transcript = head + codex.record(thread, is_turn_completed)
    card = card_of(transcript, workdir)
    out = assert_no_leak(card, transcript, workdir)
    assert out["answerPreview"] == "Tests first, done." and final_answer(card) == "Tests first, done."
    assert card.open_items == ()


def test_a_provider_error_becomes_an_error_warning(
        codex: RawCodex, module_model: sm.ScriptedModel, workdir: Path) -> None:
    module_model.enqueue(sm.http_error(401, "invalid_api_key", f"Incorrect API key provided: {SECRET}"))
    thread = codex.start_thread(workdir)
    transcript = codex.run_turn(thread, "fail")
    assert transcript[-1]["params"]["turn"]["status"] == "failed"
    out = assert_no_leak(card_of(transcript, workdir), transcript, workdir)
    assert [w["kind"] for w in out["warnings"]] == ["error"]
    assert "401" in out["warnings"][0]["message"]


def test_a_compaction_is_counted_once(codex: RawCodex, module_model: sm.ScriptedModel, workdir: Path) -> None:
    module_model.enqueue(sm.turn(sm.message("First.")), sm.turn(sm.message("Summary of the thread.")))
    thread = codex.start_thread(workdir)
    transcript = codex.run_turn(thread, "hello")
    codex.request("thread/compact/start", {"threadId": thread})
    transcript += codex.record(thread, is_turn_completed)
    assert "contextCompaction" in json.dumps(transcript)
    out = assert_no_leak(card_of(transcript, workdir), transcript, workdir)
    assert out["compaction"]["count"] == 1 and out["compaction"]["lastAt"].startswith("20")


def test_codex_exec_json_events_build_the_card_of_the_exec_fallback(
        codex_bin: str, home: Path, module_model: sm.ScriptedModel, workdir: Path) -> None:
    module_model.enqueue(
        sm.turn(sm.update_plan([("Write notes", "in_progress")])),
        sm.turn(sm.shell_call("echo OUTCANARY; echo CMDCANARY >/dev/null", workdir=str(workdir), login=False)),
        sm.turn(sm.apply_patch(sm.add_file_patch("exec-notes.txt", ["FILECANARY"]))),
        sm.turn(sm.message(f"All done from exec with {SECRET}.")))
    binary = resolve_native(codex_bin)
    done = subprocess.run(
        [*binary.argv, "exec", "--json", "--skip-git-repo-check", "write the notes"], cwd=workdir,
        env=child_environment({**binary.env, "CODEX_HOME": str(home)}), stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=EXEC_TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    card = new_card(backend="exec", workdir=str(workdir))
    for event in events:
        card = reduce_exec_event(card, event)
    out = card.to_dict()
    text = json.dumps(out) + repr(card)
    assert all(canary not in text for canary in PLAIN + ("SECRETCANARY",))
    assert str(workdir) not in text and events[0]["thread_id"] not in text
    # exec's todo_list knows only done / not done; the list is closed again at turn end.
    assert out["steps"] == [{"title": "Write notes", "status": "pending"}]
    assert [(a["kind"], a["status"], a["summary"]) for a in out["toolActivities"]] == [
        ("commandExecution", "completed", "ran a command (exit 0)")]
    assert out["fileChanges"] == [{"path": "exec-notes.txt", "change": "add"}]
    assert out["tokenUsage"]["inputTokens"] > 0 and card.ignored_count == 0
    assert final_answer(card) == "All done from exec with [redacted]."


def test_plan_mode_asks_for_input_then_its_proposed_plan_becomes_the_steps(
        codex: RawCodex, module_model: sm.ScriptedModel, workdir: Path) -> None:
    question = {"id": "db", "header": "Database", "question": "Which database? QUERYCANARY",
                "options": [{"label": "Postgres (Recommended)", "description": "CMDCANARY"}]}
    plan = "Here is my plan.\n<proposed_plan>\n# Plan\n1. Create the schema\n2. Write the API\n</proposed_plan>\n"
    module_model.enqueue(sm.turn(sm.function_call("request_user_input", {"questions": [question]})),
                  sm.turn(sm.message(plan, [plan[:20], plan[20:60], plan[60:]])))
    thread = codex.start_thread(workdir)
    codex.request("turn/start", {"threadId": thread, "input": [{"type": "text", "text": "plan the db"}],
                                 "collaborationMode": {"mode": "plan", "settings": {
                                     "model": "gpt-5.5", "developer_instructions": None}}})
    asked = codex.record(thread, lambda m: "id" in m, answer=None)
    waiting = card_of(asked, workdir)
    assert waiting.status == "waitingInput"
    assert [(a.kind, a.summary, a.status) for a in waiting.approvals] == [
        ("userInput", "Answer 1 question", "pending")]
    codex.send({"id": asked[-1]["id"], "result": {"answers": {"db": {"answers": ["Postgres (Recommended)"]}}}})
    transcript = asked + codex.record(thread, is_turn_completed)
    assert "item/plan/delta" in methods(transcript)
    out = assert_no_leak(card_of(transcript, workdir), transcript, workdir)
    assert out["steps"] == [{"title": "Create the schema", "status": "pending"},
                            {"title": "Write the API", "status": "pending"}]
    assert [(a["kind"], a["status"]) for a in out["approvals"]] == [("userInput", "accepted")]
    assert out["threadSettings"]["collaborationMode"] == "plan" and out["status"] == "running"
