"""The built-in demo model for ``boss-agent up --demo``: a scripted agent with no account.

It reads the prompt's intent from a few words (whole words, any case; the first row
that matches wins), so a newcomer sees each kind of thing the product shows:

=========================================  ===================================================
the prompt has                             the demo
=========================================  ===================================================
plan, planning, choose, choice, which,     asks a question (what to do next: write a file, run
decide                                     a command or just answer) and acts on the answer; in
                                           Plan mode it answers with a proposed plan instead
write, create, add                         writes ``BOSS_DEMO.md`` with ``apply_patch``: a file
                                           change, and +N −0 lines in a git repository
run, test, tests, list, ls                 asks to run ``ls -la`` outside the sandbox (an
                                           approval), then says whether it ran
anything else                              the tour: a plan, ``ls -la`` (an approval), the
                                           note ``BOSS_DEMO.md``, and an answer
=========================================  ===================================================

A question outside Plan mode needs codex's ``default_mode_request_user_input``
feature, which ``up --demo`` switches on in the demo's own codex home.

The responder is a pure function of the request, so any number of tasks can run at
once: the turn's prompt is its first user message after a finished answer, and each
tool call it makes carries its step in its call id (``demo_s<step>_<n>``), so the next
step is one past the last one in the history. A user message that arrives while the
turn works (a steer) is acknowledged and the script goes on from where it was: no
approval already answered is asked again.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from boss_agent.demo import scripted_model as sm

DEMO_FILE = "BOSS_DEMO.md"
# The demo's codex home switches this on, so its questions work outside Plan mode too.
DEMO_FEATURES = {"default_mode_request_user_input": True}
DEMO_COMMAND = "ls -la"
QUESTION_ID = "demo_next"
WRITE, RUN, ANSWER = "Write a file", "Run a command", "Just answer"
SIGNATURE = "This answer comes from boss-agent's built-in demo model, not from OpenAI."
# The intents in the order they are tried: the first whose words the prompt has wins.
INTENTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("ask", re.compile(r"\b(plan|planning|choose|choice|which|decide)\b", re.I)),
    ("write", re.compile(r"\b(write|create|add)\b", re.I)),
    ("run", re.compile(r"\b(run|test|tests|list|ls)\b", re.I)),
)
_PLAN = ("Look at the project", "Write a note", "Answer")
_TOUR_NOTE = ["# Written by the boss-agent demo", "", "This file shows a file change on the card."]
WRITTEN = ["# Written by the boss-agent demo", "",
           "You asked for a file, so the demo model wrote this one with `apply_patch`.",
           "The task's card shows it as a file change; in a git repository it also",
           "counts its lines (+N −0) on the branch line.", "",
           "A real model writes what you ask for; this one always writes this note."]
QUESTION = {"id": QUESTION_ID, "header": "Next step", "question": "What should the demo do next?",
            "options": [{"label": WRITE, "description": f"Write {DEMO_FILE} (a file change on the card)."},
                        {"label": RUN, "description": f"Run `{DEMO_COMMAND}` (asks for your approval)."},
                        {"label": ANSWER, "description": "Answer in words and change nothing."}]}
_STEP_CALL = re.compile(r"demo_s(\d+)_\d+")
_call_numbers = itertools.count(1)  # only keeps call ids unique within a thread


def intent(prompt: str) -> str:
    """``ask``, ``write``, ``run`` or ``tour``: what the demo does with ``prompt``."""
    return next((name for name, words in INTENTS if words.search(prompt)), "tour")


# ------------------------------------------------------------------ reading the request


@dataclass
class Turn:
    """What the request's history says about the turn the demo is in."""

    prompt: str = ""
    plan_mode: bool = False
    done: int = 0  # steps taken: one past the highest step in a call id of this turn
    outputs: dict[int, list[str]] = field(default_factory=dict)  # step -> its calls' outputs
    steers: int = 0  # user messages that arrived while the turn worked
    acknowledged: bool = True  # whether the demo has answered the last steer yet


def _text(entry: dict[str, Any]) -> str:
    content = entry.get("content")
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))


def _step_of(call_id: Any) -> int | None:
    match = _STEP_CALL.fullmatch(call_id) if isinstance(call_id, str) else None
    return int(match.group(1)) if match else None


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):  # content items
        return "".join(str(p.get("text", "")) for p in output if isinstance(p, dict))
    return json.dumps(output)


def read_turn(request: sm.RecordedRequest) -> Turn:
    """The current turn: its prompt, its mode, the steps done and their outputs, its steers.

    A user message opens a new turn when the one before it ended with an answer (an
    assistant message that is not commentary) or was interrupted; one that arrives
    after the model moved in this turn is a steer. Messages codex writes itself
    (``<environment_context>``, ``<turn_aborted>``, AGENTS.md) are not prompts.
    """
    turn, ended, moved, plan_mode = Turn(), True, False, False
    for entry in request.body.get("input", []):
        if not isinstance(entry, dict):
            continue
        kind, role = entry.get("type"), entry.get("role")
        if kind == "message" and role == "developer":
            for mode in re.findall(r"<collaboration_mode>\s*(#[^\n]*)", _text(entry)):
                plan_mode = mode.startswith("# Plan Mode")
        elif kind == "message" and role == "user":
            text = _text(entry).strip()
            if text.startswith("<turn_aborted>"):
                ended = True
            elif text.startswith("<") or text.startswith("# AGENTS.md"):
                continue
            elif ended or not moved:
                turn, ended, moved = Turn(prompt=text), False, False
            else:
                turn.steers += 1
                turn.acknowledged = False
        elif kind == "message" and role == "assistant":
            ended = entry.get("phase") != "commentary"
            moved = turn.acknowledged = True
        elif kind in ("function_call", "custom_tool_call", "reasoning"):
            step = _step_of(entry.get("call_id"))
            if step is not None:
                turn.done = max(turn.done, step + 1)
                turn.acknowledged = True
            ended, moved = False, True
        elif kind in ("function_call_output", "custom_tool_call_output"):
            step = _step_of(entry.get("call_id"))
            if step is not None:
                turn.outputs.setdefault(step, []).append(_output_text(entry.get("output")))
    turn.plan_mode = plan_mode
    return turn


# ------------------------------------------------------------------------- the scripts

Items = list[list[sm.Event]]
Step = Callable[[Turn, int], Items]  # (the turn, this step's number) -> the response's items


def _call(step: int) -> str:
    return f"demo_s{step}_{next(_call_numbers)}"


def _answer(text: str) -> Items:
    """The final answer, streamed a sentence at a time."""
    full = f"{text} {SIGNATURE}"
    return [sm.message(full, re.split(r"(?<=\. )", full))]


def _plan(done: int) -> list[tuple[str, str]]:
    return [(step, "completed" if i < done else "in_progress" if i == done else "pending")
            for i, step in enumerate(_PLAN)]


def _run_command(_turn: Turn, step: int) -> Items:
    return [sm.shell_call(DEMO_COMMAND, call_id=_call(step), sandbox_permissions="require_escalated",
                          justification="The demo asks before it runs a command")]


TOUR: list[Step] = [
    lambda _t, s: [sm.reasoning(["**Planning** a short demo task"]),
                   sm.update_plan(_plan(0), "A short demo of boss-agent", _call(s))],
    lambda t, s: [sm.message("I'll look at the project first.", phase="commentary"), *_run_command(t, s)],
    lambda _t, s: [sm.update_plan(_plan(1), call_id=_call(s)),
                   sm.apply_patch(sm.add_file_patch(DEMO_FILE, _TOUR_NOTE), _call(s))],
    lambda _t, s: [sm.update_plan(_plan(3), call_id=_call(s))],
    lambda _t, _s: _answer(f"Done. I looked at the project and wrote {DEMO_FILE}."),
]


def _wrote(turn: Turn, step: int) -> Items:
    if any("Success" in out for out in turn.outputs.get(step - 1, [])):
        return _answer(f"Done. I wrote {DEMO_FILE}, {len(WRITTEN)} lines: the card shows the file change, "
                       f"and in a git repository +{len(WRITTEN)} −0 on the branch.")
    return _answer(f"I could not write {DEMO_FILE}: the patch did not apply.")


WRITE_STEPS: list[Step] = [
    lambda _t, s: [sm.message(f"I'll write {DEMO_FILE}.", phase="commentary"),
                   sm.apply_patch(sm.add_file_patch(DEMO_FILE, WRITTEN), _call(s))],
    _wrote,
]


def _ran_answer(turn: Turn, step: int) -> Items:
    if any("Process exited with code" in out for out in turn.outputs.get(step - 1, [])):
        return _answer(f"Done. I ran `{DEMO_COMMAND}` in the project after you approved it.")
    return _answer(f"I did not run `{DEMO_COMMAND}`: it was not approved.")


RUN_STEPS: list[Step] = [
    lambda t, s: [sm.message(f"I'll run `{DEMO_COMMAND}`; it runs outside the sandbox, so it asks you first.",
                             phase="commentary"), *_run_command(t, s)],
    _ran_answer,
]

_PROPOSED = {WRITE: [f"Write {DEMO_FILE} with a short note.", "Show it on the card as a file change."],
             RUN: [f"Run `{DEMO_COMMAND}` in the project, after your approval.", "Say whether it ran."],
             ANSWER: ["Answer in words.", "Change nothing."]}


def _choice(turn: Turn) -> str | None:
    """The option the person picked for the question of step 0, if any."""
    for out in turn.outputs.get(0, []):
        try:
            answers = json.loads(out)["answers"][QUESTION_ID]["answers"]
        except (ValueError, KeyError, TypeError):
            continue
        return next((a for a in answers if a in _PROPOSED), ANSWER) if answers else None
    return None


def _ask(_turn: Turn, step: int) -> Items:
    return [sm.function_call("request_user_input", {"questions": [QUESTION]}, _call(step))]


def _after_the_question(turn: Turn, step: int) -> Items:
    choice = _choice(turn)
    if choice is None:
        return _answer("I asked what to do next and got no answer, so I changed nothing.")
    if turn.plan_mode:
        steps = "".join(f"{i}. {line}\n" for i, line in enumerate(_PROPOSED[choice], 1))
        return [sm.message(f"Here is my plan.\n<proposed_plan>\n# Plan\n{steps}</proposed_plan>\n{SIGNATURE}")]
    script = {WRITE: WRITE_STEPS, RUN: RUN_STEPS}.get(choice)
    if script is None:
        return _answer("You chose an answer in words: I am a scripted demo, so this is it.")
    return script[min(step - 1, len(script) - 1)](turn, step)


SCRIPTS: dict[str, list[Step]] = {"tour": TOUR, "write": WRITE_STEPS, "run": RUN_STEPS,
                                  "ask": [_ask, _after_the_question]}
STEER_ACK = ("I read your message. I am boss-agent's scripted demo, so I carry on from where I was "
             "instead of starting over: nothing you already answered is asked again.")


def demo_responder(request: sm.RecordedRequest) -> sm.Response:
    """The demo agent's next move for ``request``."""
    turn = read_turn(request)
    script = SCRIPTS[intent(turn.prompt)]
    items = script[min(turn.done, len(script) - 1)](turn, turn.done)
    if not turn.acknowledged:
        items = [sm.message(STEER_ACK, phase="commentary"), *items]
    return sm.turn(*items)
