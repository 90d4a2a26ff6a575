"""The demo model's intent table and how it reads a turn's history (no codex: requests by hand).

Before the fix the demo ran the same tour for every prompt and counted only the tool
results after the last user message, so a steer restarted the tour and asked the
same approval again.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from boss_agent.demo import scripted_model as sm
from boss_agent.demo.model import ANSWER, DEMO_FILE, QUESTION_ID, RUN, STEER_ACK, WRITE, WRITTEN, demo_responder

Entry = dict[str, Any]
ENVIRONMENT = "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"
PLAN_MODE = "<collaboration_mode># Plan Mode (Conversational)\n\nYou work in 3 phases"
DEFAULT_MODE = "<collaboration_mode># Collaboration Mode: Default\n\nYou are now in Default mode."


def user(text: str) -> Entry:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def developer(text: str) -> Entry:
    return {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": text}]}


def assistant(text: str, phase: str | None = None) -> Entry:
    entry: Entry = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
    return {**entry, "phase": phase} if phase else entry


def call(name: str, call_id: str, output: str) -> list[Entry]:
    """A function call the demo made and what codex sent back for it."""
    return [{"type": "function_call", "name": name, "arguments": "{}", "call_id": call_id},
            {"type": "function_call_output", "call_id": call_id, "output": output}]


def moves(*entries: Entry) -> list[tuple[str, str]]:
    """What the demo answers to a request with ``entries``: (item type, tool name or text)."""
    request = sm.RecordedRequest("/v1/responses", {}, {"input": [developer(DEFAULT_MODE), user(ENVIRONMENT),
                                                                 *entries]})
    done = [e["item"] for e in demo_responder(request).events if e["type"] == "response.output_item.done"]
    return [(item["type"], item.get("name") or "".join(c.get("text", "") for c in item.get("content") or []))
            for item in done]


def tools(found: list[tuple[str, str]]) -> list[str]:
    return [name for kind, name in found if kind in ("function_call", "custom_tool_call")]


@pytest.mark.parametrize(("prompt", "first_tool"), [
    ("Plan the storage layer", "request_user_input"),
    ("Which database should we use?", "request_user_input"),
    ("choose a name, then write it down", "request_user_input"),  # the question row comes first
    ("Write a file", "apply_patch"),
    ("create a README and run it", "apply_patch"),  # writing comes before running
    ("add a changelog", "apply_patch"),
    ("run ls", "exec_command"),
    ("RUN THE TESTS", "exec_command"),
    ("list the files", "exec_command"),
    ("Tidy the project up", "update_plan"),  # anything else: the tour
    ("address the planets, running late", "update_plan"),  # whole words only
])
def test_the_first_move_follows_the_prompts_intent(prompt: str, first_tool: str) -> None:
    assert tools(moves(user(prompt)))[:1] == [first_tool]


def test_a_written_file_is_reported_with_its_lines() -> None:
    found = moves(user("write a file"), *call("apply_patch", "demo_s0_7", "Success. Updated the following files:"))
    assert tools(found) == []
    assert f"I wrote {DEMO_FILE}, {len(WRITTEN)} lines" in found[-1][1]


@pytest.mark.parametrize(("output", "said"), [
    ("Chunk ID: 1\nProcess exited with code 0\nOutput:\ntotal 8\n", "Done. I ran `ls -la`"),
    ("exec command rejected by user", "I did not run `ls -la`"),
])
def test_a_run_says_whether_the_command_ran(output: str, said: str) -> None:
    found = moves(user("run ls"), *call("exec_command", "demo_s0_3", output))
    assert tools(found) == [] and found[-1][1].startswith(said)


def answered(choice: str) -> list[Entry]:
    return call("request_user_input", "demo_s0_1", json.dumps({"answers": {QUESTION_ID: {"answers": [choice]}}}))


@pytest.mark.parametrize(("choice", "next_tools"), [(WRITE, ["apply_patch"]), (RUN, ["exec_command"]), (ANSWER, [])])
def test_the_answer_to_the_question_chooses_what_the_demo_does(choice: str, next_tools: list[str]) -> None:
    assert tools(moves(user("which way?"), *answered(choice))) == next_tools


def test_in_plan_mode_the_answer_to_the_question_is_a_proposed_plan() -> None:
    found = moves(developer(PLAN_MODE), user("plan it"), *answered(RUN))
    assert tools(found) == []
    assert "<proposed_plan>\n# Plan\n1. Run `ls -la`" in found[-1][1]


def test_a_question_codex_refuses_ends_with_an_answer_not_a_loop() -> None:
    found = moves(user("which way?"), *call("request_user_input", "demo_s0_1",
                                            "request_user_input is unavailable in Default mode"))
    assert tools(found) == [] and "got no answer" in found[-1][1]


TOUR_SO_FAR = [user("Tidy the project up"), *call("update_plan", "demo_s0_1", "Plan updated"),
               assistant("I'll look at the project first.", "commentary"),
               *call("exec_command", "demo_s1_2", "Process exited with code 0\nOutput:\n")]


def test_a_steer_is_acknowledged_and_the_tour_goes_on_without_asking_again() -> None:
    found = moves(*TOUR_SO_FAR, user("also check the docs"))
    assert found[0] == ("message", STEER_ACK)
    assert tools(found) == ["update_plan", "apply_patch"]  # the tour's next step, not its first


def test_after_the_acknowledgement_the_steer_is_not_acknowledged_again() -> None:
    steered = [*TOUR_SO_FAR, user("also check the docs"), assistant(STEER_ACK, "commentary"),
               *call("update_plan", "demo_s2_3", "Plan updated"), *call("apply_patch", "demo_s2_4", "Success.")]
    found = moves(*steered)
    assert ("message", STEER_ACK) not in found and tools(found) == ["update_plan"]


def test_a_new_prompt_after_a_finished_answer_is_a_new_turn() -> None:
    finished = [*TOUR_SO_FAR, *call("update_plan", "demo_s2_3", "Plan updated"),
                *call("update_plan", "demo_s3_4", "Plan updated"), assistant("Done.")]
    assert tools(moves(*finished, user(ENVIRONMENT), user("write a file"))) == ["apply_patch"]
    assert tools(moves(*TOUR_SO_FAR, user("<turn_aborted>"), user("run ls"))) == ["exec_command"]
