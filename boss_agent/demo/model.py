"""The built-in demo model for ``boss-agent up --demo``: a scripted agent with no account.

It answers every user turn with the same small piece of work, so the whole loop can be
seen on one machine: it plans, asks to run a command (which needs an approval on the
phone or the web page), writes a file, ticks its plan off and answers. Which step comes
next is read from the request itself (how many tool results follow the last user
message), so the responder is a pure function and any number of tasks can run at once.
"""

from __future__ import annotations

from boss_agent.demo import scripted_model as sm

DEMO_FILE = "BOSS_DEMO.md"
_PLAN = ("Look at the project", "Write a note", "Answer")


def _tool_results_since_last_user_message(request: sm.RecordedRequest) -> int:
    count = 0
    for entry in request.body.get("input", []):
        if not isinstance(entry, dict):
            continue
        if entry.get("type") == "message" and entry.get("role") == "user":
            count = 0
        elif entry.get("type") in ("function_call_output", "custom_tool_call_output"):
            count += 1
    return count


def _plan(done: int) -> list[tuple[str, str]]:
    return [(step, "completed" if i < done else "in_progress" if i == done else "pending")
            for i, step in enumerate(_PLAN)]


def demo_responder(request: sm.RecordedRequest) -> sm.Response:
    """The demo agent's next move for ``request``."""
    step = _tool_results_since_last_user_message(request)
    if step == 0:
        return sm.turn(sm.reasoning(["**Planning** a short demo task"]),
                       sm.update_plan(_plan(0), "A short demo of boss-agent"))
    if step == 1:
        return sm.turn(sm.message("I'll look at the project first.", phase="commentary"),
                       sm.shell_call("ls -la", sandbox_permissions="require_escalated",
                                     justification="The demo asks before it runs a command"))
    if step == 2:
        note = ["# Written by the boss-agent demo", "", "This file shows a file change on the card."]
        return sm.turn(sm.update_plan(_plan(1)), sm.apply_patch(sm.add_file_patch(DEMO_FILE, note)))
    if step < 5:  # step 2 answered two calls at once (plan and patch)
        return sm.turn(sm.update_plan(_plan(3)))
    return sm.turn(sm.message(
        f"Done. I looked at the project and wrote {DEMO_FILE}. "
        "This answer comes from boss-agent's built-in demo model, not from OpenAI.",
        ["Done. ", "I looked at the project ", f"and wrote {DEMO_FILE}. ",
         "This answer comes from boss-agent's built-in demo model, not from OpenAI."]))
