"""The card's bounds (execution-progress.md *Bounds*): each list capped, the newest and
every unresolved entry kept, each list's left-out count in ``omitted``, and the
serialized card under 256 KiB whatever its strings hold."""

from __future__ import annotations

import json
from typing import Any

from boss_agent.progress import bounds
from boss_agent.progress.bounds import CARD_MAX_BYTES, fit_wire, trim, wire_size
from boss_agent.progress.card import Card, Step, new_card
from boss_agent.progress.reducer import reduce
from tests.unit.test_card_reducer import WD, item, note, run

START = note("turn/started", threadId="T", turn={"id": "U"})


def test_trim_keeps_every_unresolved_entry_and_the_newest_settled_ones() -> None:
    steps = [Step(f"s{i}", "completed") for i in range(10)]
    steps[2] = Step("current", "inProgress")
    steps[5] = Step("next", "pending")
    kept, dropped = trim(steps, 4)
    assert [s.title for s in kept] == ["current", "next", "s8", "s9"] and dropped == 6
    # Unresolved alone over the cap: the one in progress, then the newest pending ones.
    many = [Step("now", "inProgress")] + [Step(f"p{i}", "pending") for i in range(10)]
    kept, dropped = trim(many, 3)
    assert [s.title for s in kept] == ["now", "p8", "p9"] and dropped == 8


def test_a_40000_step_plan_keeps_200_steps_and_counts_the_rest() -> None:
    plan = [{"step": f"step {i}", "status": "completed" if i < 30_000 else "pending"} for i in range(40_000)]
    plan[35_000]["status"] = "in_progress"
    card = run(START, note("turn/plan/updated", plan=plan))
    out = card.to_dict()
    assert len(out["steps"]) == bounds.MAX_STEPS == 200
    assert out["omitted"]["steps"] == 39_800
    assert {"title": "step 35000", "status": "inProgress"} in out["steps"]
    assert out["steps"][-1] == {"title": "step 39999", "status": "pending"}
    # A new, short plan replaces the long one, and its count with it.
    card = reduce(card, note("turn/plan/updated", plan=[{"step": "only", "status": "pending"}]))
    assert card.to_dict()["omitted"]["steps"] == 0


def _approval(n: int) -> list[dict[str, Any]]:
    return [{"id": f"req-{n}", "method": "item/commandExecution/requestApproval",
             "params": {"threadId": "T", "turnId": "U", "itemId": f"cmd-{n}", "command": "ls"}},
            note("serverRequest/resolved", threadId="T", requestId=f"req-{n}"),
            item("completed", type="commandExecution", id=f"cmd-{n}", status="completed", exitCode=0)]


def test_approvals_keep_the_pending_ones_and_the_newest_and_never_reuse_an_id() -> None:
    pending = {"id": "req-open", "method": "item/commandExecution/requestApproval",
               "params": {"threadId": "T", "turnId": "U", "itemId": "cmd-open", "command": "ls"}}
    messages = [START, pending]
    for n in range(300):
        messages += _approval(n)
    card = run(*messages)
    out = card.to_dict()
    assert len(out["approvals"]) == bounds.MAX_APPROVALS and out["omitted"]["approvals"] == 101
    assert out["approvals"][0]["status"] == "pending"  # the oldest, still waiting: kept
    assert out["approvals"][-1]["id"] == "approval-301"
    assert len({a["id"] for a in out["approvals"]}) == 200
    assert card.status == "waitingApproval"
    assert len(out["toolActivities"]) == bounds.MAX_TOOL_ACTIVITIES
    assert out["omitted"]["toolActivities"] == 300 - bounds.MAX_TOOL_ACTIVITIES


def test_tool_activities_keep_the_running_ones() -> None:
    running = item("started", type="commandExecution", id="cmd-long")
    messages = [START, running]
    for n in range(250):
        messages += [item("started", type="webSearch", id=f"w{n}"),
                     item("completed", type="webSearch", id=f"w{n}", action={"type": "search"})]
    out = run(*messages).to_dict()
    assert len(out["toolActivities"]) == bounds.MAX_TOOL_ACTIVITIES
    assert out["omitted"]["toolActivities"] == 251 - bounds.MAX_TOOL_ACTIVITIES
    assert out["toolActivities"][0] == {"kind": "commandExecution", "name": "shell",
                                        "status": "inProgress", "summary": "running a command"}


def test_file_changes_keep_the_newest_500_paths() -> None:
    changes = [{"path": f"{WD}/src/f{i}.py", "kind": {"type": "add"}, "diff": "+x"} for i in range(700)]
    card = run(START, item("started", type="fileChange", id="fc", changes=changes, status="inProgress"))
    card = reduce(card, item("started", type="fileChange", id="fc2", status="inProgress",
                             changes=[{"path": f"{WD}/src/f0.py", "kind": {"type": "update"}}]))
    out = card.to_dict()
    assert len(out["fileChanges"]) == bounds.MAX_FILE_CHANGES and out["omitted"]["fileChanges"] == 201
    assert out["fileChanges"][-1] == {"path": "src/f0.py", "change": "update"}
    assert out["fileChanges"][0] == {"path": "src/f201.py", "change": "add"}


def test_background_agents_keep_the_running_ones() -> None:
    messages = [START]
    for n in range(80):
        messages.append(note("thread/started", thread={"id": f"sub-{n}", "parentThreadId": "T",
                                                        "agentNickname": f"agent{n}"}))
        if n:  # the first one keeps running
            messages.append(note("boss/backgroundAgent", thread=f"sub-{n}", status="completed"))
    out = run(*messages).to_dict()
    agents = out["backgroundAgents"]
    assert len(agents) == bounds.MAX_BACKGROUND_AGENTS and out["omitted"]["backgroundAgents"] == 30
    assert agents[0] == {"name": "agent0", "status": "running", "source": "subAgent"}
    assert agents[-1]["name"] == "agent79"


def test_omitted_is_always_there_and_zero_for_a_small_card() -> None:
    out = new_card(workdir=WD).to_dict()
    assert out["omitted"] == {"steps": 0, "approvals": 0, "fileChanges": 0, "toolActivities": 0,
                              "backgroundAgents": 0, "artifacts": 0}


def test_the_card_stays_under_256_kib_whatever_its_strings_hold() -> None:
    wide = "界" * 400  # three bytes each in UTF-8, cut to 300 chars per string
    messages = [START, note("turn/plan/updated", plan=[{"step": wide + str(i), "status": "pending"}
                                                       for i in range(500)])]
    changes = [{"path": f"{WD}/{wide}/{i}", "kind": {"type": "add"}} for i in range(600)]
    messages.append(item("started", type="fileChange", id="fc", changes=changes, status="inProgress"))
    for n in range(220):
        messages.append(item("started", type="mcpToolCall", id=f"m{n}", server=wide, tool=wide))
    card = run(*messages)
    out = card.to_dict()
    assert wire_size(out) < CARD_MAX_BYTES
    full = len(out["steps"]) + out["omitted"]["steps"]
    assert full == 500 and out["omitted"]["fileChanges"] > 100
    assert json.loads(json.dumps(out)) == out


def test_fit_wire_trims_a_serialized_card_to_any_budget_and_counts_what_it_dropped() -> None:
    card: Card = run(START, note("turn/plan/updated", plan=[{"step": f"step {i} " + "x" * 200,
                                                             "status": "pending"} for i in range(150)]))
    out = card.to_dict()
    small = fit_wire(out, 8 * 1024)
    assert wire_size(small) <= 8 * 1024 < wire_size(out)
    assert len(small["steps"]) + small["omitted"]["steps"] == 150
    assert out["omitted"]["steps"] == 0  # the input is not changed
    tiny = fit_wire(out, 1024)
    assert wire_size(tiny) <= 1024 and len(tiny["steps"]) + tiny["omitted"]["steps"] == 150
    labels = fit_wire(out, 300)  # smaller than the card without any list: strings become labels
    assert set(labels) == set(out) and labels["steps"] == [] and wire_size(labels) < wire_size(tiny)


def test_a_result_over_1_mib_is_cut_with_a_marker_and_a_shorter_one_is_untouched() -> None:
    assert bounds.cut_result_text("short") == "short" and bounds.cut_result_text(None) is None
    text = "é" * (bounds.MAX_RESULT_BYTES // 2 + 10)  # two bytes each: just over 1 MiB
    cut = bounds.cut_result_text(text)
    assert cut is not None and cut.endswith(bounds.RESULT_CUT_MARKER)
    assert len(cut.encode()) <= bounds.MAX_RESULT_BYTES and cut.startswith("é" * 1000)
    exact = "a" * bounds.MAX_RESULT_BYTES
    assert bounds.cut_result_text(exact) == exact
