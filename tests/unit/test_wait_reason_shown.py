"""`boss-agent task` says why its task waits, in the live card and in the plain lines."""

from __future__ import annotations

from boss_agent.cli.task_follow import ChangeLines
from boss_agent.controlplane.queue import describe_wait
from tests.unit.test_terminal_card import draw

REASON = describe_wait(2, 2)
QUEUED = {"status": "queued", "waitReason": REASON}


def test_the_reason_reads_as_the_user_would_say_it() -> None:
    assert REASON == "2 tasks are waiting on your approval; this one starts when a slot frees"
    assert describe_wait(2, 1) == "2 tasks are running (1 waiting on your approval); this one starts when a slot frees"
    assert describe_wait(1, 0) == "1 task is running; this one starts when a slot frees"


def test_the_live_card_of_a_waiting_task_says_why() -> None:
    assert REASON in " ".join(draw(QUEUED).split())
    assert "waiting for the device" in draw({"status": "queued"})


def test_the_plain_lines_say_why_once_and_again_when_it_changes() -> None:
    lines = ChangeLines("http://127.0.0.1:8765/")
    assert f"waiting: {REASON}" in lines.lines(QUEUED)
    assert lines.lines(QUEUED) == []
    other = describe_wait(2, 1)
    assert lines.lines({**QUEUED, "waitReason": other}) == [f"waiting: {other}"]
    assert lines.lines({"status": "running", "waitReason": None}) == ["status: running"]
