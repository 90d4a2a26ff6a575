"""The page says why a queued task waits, and updates it live, in a real headless Chromium."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.register_assert_rewrite("tests.support.controlplane")  # before the import, for its asserts
from tests.support.controlplane import pair

pytest_plugins = ("tests.support.controlplane",)  # its fixtures: plane, http, local, clock, db_path
from tests.support.webdriver import chromium

pytestmark = pytest.mark.browser


async def test_a_queued_task_behind_two_approvals_says_so_and_the_line_follows_a_decision(
        http, plane, tmp_path: Path):
    device = await pair(http, plane)
    running = [plane.submit_task("first"), plane.submit_task("second")]
    await device.claim(slots=2)
    await device.heartbeat(state="busy", runningTaskIds=running, maxConcurrentTasks=2)
    for task_id in running:
        assert (await device.ask(task_id, f"apr-{task_id}")).status_code == 201
    queued = plane.submit_task("third")
    reason = f'[data-task-id="{queued}"] .wait-reason'

    async with chromium(tmp_path / "profile") as browser:
        await browser.open(plane.page_url)
        await browser.wait_for(reason, "2 tasks are waiting on your approval; this one starts when a slot frees")
        plane.decide(running[0], f"apr-{running[0]}", "accept")
        await browser.wait_for(reason, "2 tasks are running (1 waiting on your approval)")
