"""The page in a real headless Chromium: it shows devices and tasks live, approves, submits.

The device side is played over the real device API with httpx; the browser is
driven through chromedriver (``tests/support/webdriver.py``). A screenshot of the final page
lands in ``test-artifacts/controlplane-page.png``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.support.controlplane import pair
from tests.support.webdriver import chromium
from tests.support.waits import within

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts"
HOSTILE = '<img src=x onerror="window.__pwned=1">'
CARD = {
    "version": 1, "status": "waitingApproval", "backend": "app_server",
    "steps": [{"title": "Read the parser", "status": "completed"}, {"title": "Fix the test", "status": "inProgress"}],
    "toolActivities": [{"kind": "commandExecution", "name": "shell", "status": "completed",
                        "summary": "ran a command (exit 0)"}],
    "fileChanges": [{"path": "src/parser.py", "change": "update"}],
    "branch": {"name": "fix-parser", "changedFiles": 1, "insertions": 3, "deletions": 1},
    "tokenUsage": {"inputTokens": 1200, "outputTokens": 300, "totalTokens": 1500},
    "warnings": [{"kind": "warning", "message": "model rerouted"}],
    "modelRoute": {"from": "gpt-a", "to": "gpt-b", "reason": "capacity"},
    "backgroundAgents": [{"name": "reviewer", "status": "running", "source": "spawn"}],
    "answerPreview": "Looking at the parser " + HOSTILE,
}


async def test_the_page_shows_a_device_and_a_task_and_records_an_approval_clicked_on_it(
        http, plane, tmp_path: Path):
    device = await pair(http, plane, "kris-mbp")
    await device.heartbeat(capabilities={"codexAppServer": {"available": True, "version": "0.171.0",
                                                           "transport": "stdio"}})
    task_id = plane.submit_task("Fix the failing test " + HOSTILE, workdir="/src/app")
    await device.claim()
    await device.progress(task_id, 1, CARD)
    assert (await device.ask(task_id, "apr_1", summary="Run the test suite " + HOSTILE)).status_code == 201
    task_css = f'[data-task-id="{task_id}"]'

    async with chromium(tmp_path / "profile") as browser:
        await browser.open(plane.url + "/")  # without the token: no page, no cookie, a hint
        assert "boss-agent up" in await browser.text("body")
        assert await browser.execute("return document.cookie") == ""
        await browser.open(plane.page_url)
        await browser.wait_for(f'[data-device-id="{device.device_id}"] .name', "kris-mbp")
        await browser.wait_for(f'[data-device-id="{device.device_id}"] [data-capability]', "0.171.0")
        await browser.wait_for(f"{task_css} .status", "waitingApproval")
        await browser.wait_for(f'{task_css} .step[data-status="inProgress"]', "Fix the test")
        for part, text in ((".tools", "ran a command"), (".file-changes", "src/parser.py"),
                           (".branch", "fix-parser"), (".token-usage", "1500"), (".warnings", "rerouted"),
                           (".details", "gpt-a → gpt-b"), (".details", "agent reviewer")):
            await browser.wait_for(f"{task_css} {part}", text)

        async with asyncio.TaskGroup() as group:
            poll = group.create_task(device.poll(task_id, "apr_1", wait_ms=30_000))
            await browser.click(f'{task_css} [data-approval-id="apr_1"] button[data-decision="accept"]')
            answer = await within(poll)
        assert answer.json() == {"status": "decided", "decision": "accept"}
        await browser.wait_for(f'{task_css} [data-approval-id="apr_1"][data-status="decided"] .decision', "accept")
        assert plane.task(task_id)["approvals"][0]["decision"] == "accept"

        questions = [{"id": "db_choice", "header": "Database", "question": "Which database?", "isSecret": False,
                      "options": [{"label": "Postgres", "description": "Robust"}, {"label": "SQLite"}]}]
        await device.ask(task_id, "apr_ui", kind="userInput", summary="A question", questions=questions,
                         availableDecisions=["accept", "decline"])
        ui = f'{task_css} [data-approval-id="apr_ui"]'
        await browser.wait_for(f'{ui} [data-question-id="db_choice"] legend', "Database")
        await browser.click(f'{ui} input[type=radio][value="SQLite"]')
        async with asyncio.TaskGroup() as group:
            poll = group.create_task(device.poll(task_id, "apr_ui", wait_ms=30_000))
            await browser.click(f'{ui} button[data-decision="answers"]')
            answer = await within(poll)
        assert answer.json()["answers"] == {"db_choice": ["SQLite"]}
        await browser.wait_for(f'{ui}[data-status="decided"] .decision', "answered")

        await browser.type("#submit-form textarea[name=prompt]", "Write the release notes")
        await browser.type("#submit-form input[name=workdir]", "/src/app")
        await browser.click("#submit-form button[type=submit]")
        await browser.wait_for("#submit-status", "queued")
        new_id = await browser.attribute("#submit-status", "data-task-id")
        submitted = plane.task(new_id)
        assert submitted["task"]["prompt"] == "Write the release notes" and submitted["task"]["workdir"] == "/src/app"
        await browser.wait_for(f'[data-task-id="{new_id}"][data-status="queued"] .status', "queued")

        # Everything hostile was shown as text, never parsed as markup.
        assert await browser.execute("return window.__pwned === undefined")
        assert await browser.execute(f"return document.querySelectorAll('{task_css} img').length") == 0
        assert HOSTILE in await browser.text(f"{task_css} .answer")
        await browser.screenshot(ARTIFACTS / "controlplane-page.png")

