"""Why a queued task waits: every slot of the device is held, and by what.

The control plane knows the device's running tasks (its own), their pending approvals
and, from the heartbeat, how many tasks the device runs at once; a queued task's view
says why it has not started (``waitReason``), and a change of the reason reaches the
page as a live event of the queued task itself.
"""

from __future__ import annotations

import pytest

pytest.register_assert_rewrite("tests.support.controlplane")  # before the import, for its asserts
from tests.support.controlplane import EVENT_TIMEOUT_S, pair

pytest_plugins = ("tests.support.controlplane",)  # its fixtures: plane, http, local, clock, db_path

SLOT_FREES = "this one starts when a slot frees"


async def _full(device, plane, slots: int) -> list[str]:
    """``slots`` tasks running on ``device``, which says in its heartbeat that it runs that many."""
    running = [plane.submit_task(f"job {n}") for n in range(slots)]
    assert [t["taskId"] for t in await device.claim(slots=slots)] == running
    beat = await device.heartbeat(state="busy", runningTaskIds=running, maxConcurrentTasks=slots)
    assert beat.status_code == 200, beat.text
    return running


async def _both_asking(http, plane) -> tuple[str, str, str]:
    """Two running tasks in both slots, each waiting on an approval; a third queued."""
    device = await pair(http, plane)
    first, second = await _full(device, plane, 2)
    for task_id in (first, second):
        assert (await device.ask(task_id, f"appr-{task_id}")).status_code == 201
    return first, second, plane.submit_task("and this")


async def test_a_task_behind_two_approvals_says_it_waits_on_them(http, plane):
    first, _second, third = await _both_asking(http, plane)
    assert plane.task(third)["waitReason"] == f"2 tasks are waiting on your approval; {SLOT_FREES}"
    assert plane.task(first)["waitReason"] is None, "only a queued task waits for a slot"


async def test_an_answered_approval_changes_the_reason_live(http, plane):
    first, _second, third = await _both_asking(http, plane)
    plane.decide(first, f"appr-{first}", "accept")
    view = await plane.wait_task(third, lambda v: "1 waiting" in (v["waitReason"] or ""), EVENT_TIMEOUT_S)
    assert view["waitReason"] == f"2 tasks are running (1 waiting on your approval); {SLOT_FREES}"


async def test_one_running_task_in_the_only_slot_is_named_in_the_singular(http, plane):
    device = await pair(http, plane)
    await _full(device, plane, 1)
    queued = plane.submit_task("next")
    assert plane.task(queued)["waitReason"] == f"1 task is running; {SLOT_FREES}"


async def test_a_device_with_a_free_slot_gives_no_reason(http, plane):
    device = await pair(http, plane)
    running = plane.submit_task("one")
    await device.claim(slots=1)
    assert (await device.heartbeat(state="busy", runningTaskIds=[running], maxConcurrentTasks=2)).status_code == 200
    assert plane.task(plane.submit_task("two"))["waitReason"] is None
