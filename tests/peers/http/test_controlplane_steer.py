"""The local control plane's side of steering (device API §3-§4), over real HTTP:
live refs from progress uploads, and steer tasks handed over beyond ``slots``."""

from __future__ import annotations


from tests.support.controlplane import pair

THREAD = "0199a0b0-0000-7000-8000-000000000001"
TURN = "0199a0b0-0000-7000-8000-0000000000aa"


async def _running_with_refs(device, plane) -> str:
    task_id = plane.submit_task("a long job")
    assert [t["taskId"] for t in await device.claim(slots=1)] == [task_id]
    answer = await device.post(f"/api/v1/master-agent/tasks/{task_id}/progress", {
        "seq": 1, "executionProgress": {"status": "running"}, "codexThreadRef": THREAD, "turnId": TURN})
    assert answer.status_code == 200, answer.text
    return task_id


async def test_progress_refs_are_stored_and_a_later_upload_without_them_keeps_them(http, plane):
    device = await pair(http, plane)
    task_id = await _running_with_refs(device, plane)
    view = plane.task(task_id)
    assert (view["codexThreadRef"], view["turnId"]) == (THREAD, TURN)
    assert (await device.progress(task_id, 2, {"status": "running"})).status_code == 200
    assert plane.task(task_id)["turnId"] == TURN
    bad = await device.post(f"/api/v1/master-agent/tasks/{task_id}/progress",
                            {"seq": 3, "executionProgress": {}, "turnId": 7})
    assert bad.status_code == 400


async def test_a_steer_is_handed_over_at_slots_zero_but_a_new_turn_is_not(http, plane):
    device = await pair(http, plane)
    await _running_with_refs(device, plane)
    follow_up = plane.submit_task("next thing", codexThreadRef=THREAD)
    steer = plane.submit_task("focus on tests", codexThreadRef=THREAD, targetCodexTurnId=TURN)
    assert [t["taskId"] for t in await device.claim(slots=0)] == [steer]
    assert [t["taskId"] for t in await device.claim(slots=1)] == [follow_up]


async def test_a_steer_of_a_turn_running_on_another_device_goes_only_to_that_device(http, plane):
    owner = await pair(http, plane, "owner")
    other = await pair(http, plane, "other")
    await _running_with_refs(owner, plane)
    steer = plane.submit_task("focus on tests", codexThreadRef=THREAD, targetCodexTurnId=TURN)
    assert await other.claim(slots=1) == []
    assert [t["taskId"] for t in await owner.claim(slots=0)] == [steer]
