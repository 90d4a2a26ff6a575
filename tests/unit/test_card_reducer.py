"""The reducer as a pure function: no event loop, no codex, one message at a time.

The message shapes are the ones codex 0.171.0 emits (observed on the real binary); the
real-binary transcripts are in test_card_transcripts.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from boss_agent.progress.approval_card import describe_approval
from boss_agent.progress.card import Card, final_answer, new_card
from boss_agent.progress.reducer import NOTIFICATIONS, REQUESTS, reduce, reduce_exec_event

WD = "/srv/work"


def run(*messages: dict[str, Any], card: Card | None = None) -> Card:
    card = card or new_card(workdir=WD, now="2026-11-30T00:00:00Z")
    for message in messages:
        card = reduce(card, message)
    return card


def note(method: str, **params: Any) -> dict[str, Any]:
    return {"method": method, "params": params, "emittedAtMs": 1795995745083}


def item(event: str, **fields: Any) -> dict[str, Any]:
    return note(f"item/{event}", item=fields, threadId="T", turnId="U")


def turn_done(status: str = "completed") -> dict[str, Any]:
    return note("turn/completed", threadId="T", turn={"id": "U", "status": status, "items": []})


def test_an_unknown_method_is_ignored_and_counted_never_an_error() -> None:
    card = run(note("thread/brandNewThing", x=1), {"id": 9, "method": "item/newRequest", "params": {}},
               {"id": 3, "result": {}}, note("boss/newEvent"))
    assert card.ignored_count == 3 and card.unknown_methods == ("thread/brandNewThing", "item/newRequest")
    assert card.to_dict()["status"] == "queued"


def test_a_malformed_known_message_drops_that_message_and_keeps_the_card() -> None:
    card = run(note("turn/plan/updated", plan=[{"step": "a", "status": "pending"}]),
               note("turn/plan/updated", plan="not a list"), note("item/started", item="nope"),
               note("thread/tokenUsage/updated", tokenUsage=[1, 2]), note("error", error=None))
    assert [s.title for s in card.steps] == ["a"]
    assert card.ignored_count == 1  # the token usage that was not an object


def test_reduce_never_changes_the_card_it_was_given() -> None:
    before = new_card(workdir=WD)
    snapshot = before.to_dict()
    after = reduce(before, note("turn/plan/updated", plan=[{"step": "x", "status": "pending"}]))
    assert before.to_dict() == snapshot and after is not before and after.steps


def test_turn_completed_closes_items_that_interrupt_left_open() -> None:
    card = run(note("turn/started", turn={"id": "U"}),
               item("started", type="commandExecution", id="c1", command="sleep 30", status="inProgress"),
               item("started", type="reasoning", id="r1", summary=[], content=[]),
               turn_done("interrupted"))
    out = card.to_dict()
    assert out["toolActivities"][0]["status"] == "interrupted"
    assert out["reasoningSummary"]["status"] == "completed" and card.open_items == ()


def test_one_codex_request_is_one_approval_even_when_sent_twice_or_reviewed_first() -> None:
    request = {"id": 0, "method": "item/commandExecution/requestApproval",
               "params": {"threadId": "T", "turnId": "U", "itemId": "call_1", "command": "rm -rf /"}}
    review = note("item/autoApprovalReview/started", reviewId="rv", targetItemId="call_1",
                  review={"status": "inProgress", "riskLevel": "critical"},
                  action={"type": "command", "command": "rm -rf /", "cwd": WD, "source": "shell"})
    card = run(review, request, request)
    assert len(card.approvals) == 1 and card.approvals[0].status == "pending"
    assert card.status == "queued"  # the task has not started running yet
    card = run(note("turn/started", turn={"id": "U"}), request, card=card)
    assert card.status == "waitingApproval" and len(card.approvals) == 1


def test_resolved_after_turn_completed_is_tolerated_and_keeps_the_cancellation() -> None:
    card = run(note("turn/started", turn={"id": "U"}),
               {"id": 0, "method": "item/fileChange/requestApproval",
                "params": {"threadId": "T", "turnId": "U", "itemId": "p1"}},
               turn_done("interrupted"), note("serverRequest/resolved", threadId="T", requestId=0))
    assert [(a.kind, a.status) for a in card.approvals] == [("fileChange", "cancelled")]
    assert card.status == "running"


def test_the_runner_joins_its_approval_id_to_the_codex_request() -> None:
    card = run(note("turn/started", turn={"id": "U"}),
               {"id": 4, "method": "item/commandExecution/requestApproval",
                "params": {"threadId": "T", "turnId": "U", "itemId": "c"}},
               note("boss/approval", id="apv_1", requestId=4, status="accepted"))
    out = card.to_dict()["approvals"]
    assert out == [{"id": "apv_1", "kind": "command", "status": "accepted", "risk": "high",
                    "summary": "Run a command (outside the sandbox)"}]
    assert card.status == "running"


def test_a_user_input_request_waits_for_input_until_resolved() -> None:
    card = run(note("turn/started", turn={"id": "U"}),
               {"id": 1, "method": "item/tool/requestUserInput",
                "params": {"itemId": "q", "questions": [{"question": "Which DB? sk-proj-abcdefghijkl"}]}})
    assert card.status == "waitingInput" and card.approvals[0].summary == "Answer 1 question"
    assert run(note("serverRequest/resolved", requestId=1), card=card).status == "running"


def test_auto_review_verdicts_become_auto_approved_or_denied() -> None:
    base = {"reviewId": "r", "targetItemId": "i", "action": {"type": "applyPatch", "cwd": WD, "files": []}}
    card = run(note("item/autoApprovalReview/completed", review={"status": "denied", "riskLevel": "high"},
                    **base))
    assert [(a.kind, a.status, a.risk) for a in card.approvals] == [("fileChange", "autoDenied", "high")]


def test_describe_approval_is_safe_and_ranks_risk() -> None:
    assert describe_approval("item/commandExecution/requestApproval",
                             {"command": "curl x", "networkApprovalContext": {"host": "x"}},
                             workdir=WD) == ("command", "Run curl (outside the sandbox)", "high")
    changes = [{"path": p, "kind": {"type": "update"}} for p in (f"{WD}/src/a.py", f"{WD}/b.txt", f"{WD}/c", f"{WD}/d")]
    kind, summary, risk = describe_approval("item/fileChange/requestApproval", {}, workdir=WD,
                                            item={"changes": changes})
    assert (kind, summary, risk) == ("fileChange", "Edit 4 files: src/a.py, b.txt, c +1 more", "medium")
    assert describe_approval("item/permissions/requestApproval",
                             {"permissions": {"network": {"enabled": True}}}, workdir=None)[0:2] == (
        "permissions", "Grant extra permissions: network")
    assert describe_approval("execCommandApproval", {"command": ["ls"], "parsedCmd": [{"type": "read"}]},
                             workdir=None) == ("command", "Run ls (outside the sandbox)", "high")


def test_settings_show_labels_without_cwd_or_instructions() -> None:
    card = run(note("thread/settings/updated", threadId="T", threadSettings={
        "cwd": "/home/bob/secret-project", "model": "gpt-5.5", "modelProvider": "scripted",
        "approvalPolicy": {"granular": {"rules": True}}, "approvalsReviewer": "user",
        "sandboxPolicy": {"type": "workspaceWrite", "writableRoots": ["/home/bob/x"]},
        "collaborationMode": {"mode": "plan", "settings": {"model": "m", "developer_instructions": "SECRET"}},
        "effort": "high"}))
    assert card.to_dict()["threadSettings"] == {
        "model": "gpt-5.5", "provider": "scripted", "approvalPolicy": "granular",
        "sandbox": "workspace-write", "collaborationMode": "plan", "reasoningEffort": "high"}


def test_remote_control_and_realtime_keep_only_states_and_counts() -> None:
    card = run(note("remoteControl/status/changed", status="connected", installationId="inst-123",
                    serverName="vm"),
               note("thread/realtime/started", threadId="T", version="v2"),
               note("thread/realtime/sdp", threadId="T", sdp="v=0 o=SDPCANARY"),
               note("thread/realtime/outputAudio/delta", threadId="T", audio={"data": "AUDIOCANARY"}),
               note("thread/realtime/transcript/delta", threadId="T", role="user", delta="x" * 300),
               note("thread/realtime/closed", threadId="T", reason="done"))
    out = card.to_dict()
    assert out["remoteControl"] == {"status": "connected"}
    assert out["realtime"] == {"state": "closed", "transcriptPreview": "…" + "x" * 199, "transcriptChunks": 1,
                               "audioChunks": 1, "closeReason": "done", "error": None}
    assert "CANARY" not in json.dumps(out) and "inst-123" not in json.dumps(out)


def test_a_compaction_reported_twice_in_one_turn_counts_once() -> None:
    card = run(note("turn/started", turn={"id": "U"}),
               item("completed", type="contextCompaction", id="cc"),
               note("thread/compacted", threadId="T", turnId="U"))
    assert card.to_dict()["compaction"] == {"count": 1, "lastAt": "2026-11-29T23:42:25.083Z"}


def test_branch_counts_add_up_over_turns_and_git_facts_replace_them() -> None:
    diff = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@\n+new\n-old\n context\n"
    card = run(note("turn/started", turn={"id": "U1"}), note("turn/diff/updated", diff=diff),
               note("turn/diff/updated", diff=diff), turn_done(),
               note("turn/started", turn={"id": "U2"}), note("turn/diff/updated", diff=diff + diff))
    assert (card.branch.changedFiles, card.branch.insertions, card.branch.deletions) == (3, 3, 3)
    assert "new" not in json.dumps(card.to_dict())
    card = run(note("boss/branch", name="boss/task-1", changedFiles=1, insertions=1, deletions=1,
                    gitOperations=["commit"], githubCli="unauthenticated"), card=card)
    assert card.to_dict()["branch"] == {"name": "boss/task-1", "changedFiles": 1, "insertions": 1,
                                        "deletions": 1, "gitOperations": ["commit"],
                                        "githubCli": "unauthenticated"}


def test_boss_lifecycle_events_set_status_backend_warnings_artifacts_and_close_everything() -> None:
    card = run(note("boss/status", status="running", at="2026-11-30T00:00:01Z"),
               note("boss/backend", backend="exec"),
               note("boss/warning", kind="sandbox", message="sandbox capped to workspace-write"),
               note("boss/artifacts", artifacts=[{"name": f"{WD}/dist/app.apk", "kind": "apk"}]),
               note("turn/plan/updated", plan=[{"step": "a", "status": "inProgress"}]),
               {"id": 0, "method": "item/fileChange/requestApproval", "params": {"itemId": "p"}},
               note("boss/finished", status="failed", at="2026-11-30T00:00:09Z"))
    out = card.to_dict()
    assert (out["status"], out["backend"], out["startedAt"], out["completedAt"]) == (
        "failed", "exec", "2026-11-30T00:00:01Z", "2026-11-30T00:00:09Z")
    assert out["warnings"] == [{"kind": "sandbox", "message": "sandbox capped to workspace-write"}]
    assert out["artifacts"] == [{"name": "app.apk", "kind": "apk"}]
    assert out["steps"] == [{"title": "a", "status": "failed"}]
    assert out["approvals"][0]["status"] == "cancelled"


def test_retries_and_repeated_warnings_do_not_grow_the_card_without_bound() -> None:
    retry = note("error", error={"message": "Reconnecting... 1/2"}, willRetry=True, threadId="T", turnId="U")
    card = run(retry, retry, *[note("warning", message=f"w{i}") for i in range(40)])
    kinds = [w.kind for w in card.warnings]
    assert len(kinds) == 20 and "retry" not in kinds[-19:]


def test_the_answer_loses_envelopes_and_the_preview_keeps_the_tail() -> None:
    text = "<environment_context>cwd /srv/work</environment_context>" + "a" * 600 + " done"
    card = run(item("started", type="agentMessage", id="m", text=""),
               note("item/agentMessage/delta", itemId="m", delta=text),
               item("completed", type="agentMessage", id="m", text=text))
    preview = card.to_dict()["answerPreview"]
    assert len(preview) == 500 and preview.endswith(" done") and "environment" not in preview
    assert final_answer(card) == "a" * 600 + " done"


def test_a_commentary_message_does_not_replace_the_final_answer() -> None:
    card = run(item("completed", type="agentMessage", id="m1", text="The answer."),
               item("completed", type="agentMessage", id="m2", text="checking", phase="commentary"))
    assert final_answer(card) == "The answer."


def test_a_plan_mode_plan_item_becomes_pending_steps() -> None:
    card = run(item("completed", type="plan", id="p", text="# Plan\n1. Do A\n2. Do B\n- Do C\n"))
    assert [(s.title, s.status) for s in card.steps] == [("Do A", "pending"), ("Do B", "pending"),
                                                        ("Do C", "pending")]


def test_collaboration_shows_tool_and_status_without_thread_ids_or_prompts() -> None:
    card = run(item("completed", type="collabAgentToolCall", id="c", tool="spawnAgent", status="completed",
                    senderThreadId="THREAD-A", receiverThreadIds=["THREAD-B"], prompt="PROMPTCANARY",
                    agentsStates={"THREAD-B": {"status": "running", "message": "MSGCANARY"}}),
               item("started", type="subAgentActivity", id="s", agentPath="root/explorer",
                    agentThreadId="THREAD-B", kind="started"))
    out = card.to_dict()
    assert out["threadCollaboration"] == [
        {"tool": "spawnAgent", "status": "completed", "targetKind": "agent", "agentStatus": "running"},
        {"tool": "subAgent", "status": "started", "targetKind": "agent", "agentStatus": "running"}]
    assert out["backgroundAgents"] == [{"name": "explorer", "status": "running", "source": "subAgent"}]
    assert "THREAD-" not in json.dumps(out) and "CANARY" not in json.dumps(out)


def test_repr_is_the_sanitized_view() -> None:
    card = run(note("warning", message="token=abcd1234efgh and /srv/work/src/x.py"))
    assert "abcd1234efgh" not in repr(card) and "src/x.py" in repr(card) and "/srv/work" not in repr(card)


EXEC_EVENTS = [
    {"type": "thread.started", "thread_id": "01a229b8-0000"},
    {"type": "turn.started"},
    {"type": "item.completed", "item": {"id": "item_0", "type": "reasoning", "text": "Thinking about files"}},
    {"type": "item.started", "item": {"id": "item_1", "type": "todo_list",
                                      "items": [{"text": "write file", "completed": False}]}},
    {"type": "item.started", "item": {"id": "item_2", "type": "command_execution",
                                      "command": "/bin/bash -lc 'echo CMDCANARY'", "aggregated_output": "",
                                      "exit_code": None, "status": "in_progress"}},
    {"type": "item.completed", "item": {"id": "item_2", "type": "command_execution",
                                        "command": "/bin/bash -lc 'echo CMDCANARY'",
                                        "aggregated_output": "OUTCANARY\n", "exit_code": 0,
                                        "status": "completed"}},
    {"type": "item.started", "item": {"id": "item_3", "type": "file_change",
                                      "changes": [{"path": f"{WD}/notes.txt", "kind": "add"}],
                                      "status": "in_progress"}},
    {"type": "item.completed", "item": {"id": "item_3", "type": "file_change",
                                        "changes": [{"path": f"{WD}/notes.txt", "kind": "add"}],
                                        "status": "completed"}},
    {"type": "item.completed", "item": {"id": "item_4", "type": "agent_message", "text": "All done from exec."}},
    {"type": "item.completed", "item": {"id": "item_1", "type": "todo_list",
                                        "items": [{"text": "write file", "completed": True}]}},
    {"type": "turn.completed", "usage": {"input_tokens": 130, "cached_input_tokens": 0,
                                         "output_tokens": 35, "reasoning_output_tokens": 0}},
]


def test_exec_json_events_build_the_same_kind_of_card() -> None:
    card = new_card(backend="exec", workdir=WD)
    for event in EXEC_EVENTS:
        card = reduce_exec_event(card, event)
    out = card.to_dict()
    assert out["status"] == "running" and out["backend"] == "exec"
    assert out["steps"] == [{"title": "write file", "status": "completed"}]
    assert out["toolActivities"] == [{"kind": "commandExecution", "name": "shell", "status": "completed",
                                      "summary": "ran a command (exit 0)"}]
    assert out["fileChanges"] == [{"path": "notes.txt", "change": "add"}]
    assert out["reasoningSummary"] == {"text": "Thinking about files", "status": "completed"}
    assert out["tokenUsage"]["inputTokens"] == 130 and out["tokenUsage"]["totalTokens"] == 165
    assert final_answer(card) == "All done from exec."
    assert "CANARY" not in json.dumps(out) and "01a229b8" not in json.dumps(out)
    failed = reduce_exec_event(card, {"type": "turn.failed", "error": {"message": "stream closed"}})
    assert failed.warnings[-1].kind == "error"
    assert reduce_exec_event(card, {"type": "brand.new"}).ignored_count == card.ignored_count + 1


def test_the_preview_window_never_shows_part_of_a_secret_that_starts_before_it() -> None:
    url = "https://host/" + "p" * 900 + "?token=QUERYCANARY"
    key = "-----BEGIN RSA PRIVATE KEY-----\n" + "KEYCANARY\n" * 200 + "-----END RSA PRIVATE KEY-----"
    for text in ("x " * 400 + "Authorization: Bearer AUTHCANARY " + "y" * 450,
                 "x " * 400 + url + " tail",
                 "x " * 400 + key + " tail"):
        card = run(note("item/agentMessage/delta", itemId="m", delta=text))
        preview = card.to_dict()["answerPreview"]
        assert "CANARY" not in preview and len(preview) <= 500


def test_to_dict_hands_out_fresh_objects_every_time() -> None:
    card = run(note("turn/plan/updated", plan=[{"step": "a", "status": "pending"}]),
               note("boss/branch", gitOperations=["commit"]))
    first = card.to_dict()
    first["steps"][0]["title"] = "changed"
    first["branch"]["gitOperations"].append("push")
    assert card.to_dict()["steps"][0]["title"] == "a"
    assert card.to_dict()["branch"]["gitOperations"] == ["commit"]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12)
_METHODS = st.sampled_from(sorted(NOTIFICATIONS) + sorted(REQUESTS) + [
    "boss/status", "boss/approval", "boss/branch", "boss/artifacts", "boss/finished", "boss/warning", "boss/limits",
    "no/such/method"])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_METHODS, _JSON, st.booleans()), max_size=8))
def test_any_sequence_of_odd_messages_never_raises_and_always_serializes(
        steps: list[tuple[str, Any, bool]]) -> None:
    card = new_card(workdir=WD)
    for method, params, as_request in steps:
        message: dict[str, Any] = {"method": method, "params": params}
        if as_request:
            message["id"] = 1
        card = reduce(card, message)
        card = reduce_exec_event(card, {"type": "item.completed", "item": params})
    json.dumps(card.to_dict())
    repr(card)


def test_codex_messages_after_the_task_finished_never_move_its_status_or_raise() -> None:
    lines = (Path(__file__).resolve().parents[1] / "fixtures" / "transcript_mixed.jsonl").read_text().splitlines()
    card = new_card()
    for status in ("running", "completed"):
        event = "status" if status == "running" else "finished"
        card = reduce(card, {"method": f"boss/{event}", "params": {"status": status}})
    approval = {"id": 9, "method": "item/commandExecution/requestApproval",
                "params": {"threadId": "t", "turnId": "u", "itemId": "i", "command": "ls"}}
    for message in [*map(json.loads, lines), approval, {"method": "turn/started", "params": {"turn": {"id": "x"}}}]:
        card = reduce(card, message)  # late, replayed or out-of-order: never an exception
    assert card.status == "completed"
