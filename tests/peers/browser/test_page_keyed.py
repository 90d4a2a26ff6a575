"""The page updates in place: what the person is typing into a question or an MCP form
keeps its text, selection and focus while progress arrives; the statuses the page acts
on are the server's.

The device side is played over the real device API with httpx (as in
test_controlplane_browser.py): the test decides exactly when each update arrives, and
waits for the page to show it before looking at the input.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from boss_agent.controlplane import ControlPlane, queue

pytest.register_assert_rewrite("tests.support.controlplane")  # before the import, for its asserts
from tests.support.controlplane import Device, pair  # noqa: E402
from tests.support.webdriver import PHONE, Browser, chromium  # noqa: E402
from tests.support.waits import within  # noqa: E402

pytest_plugins = ("tests.support.controlplane",)  # its fixtures: plane, http, local, clock, db_path
pytestmark = pytest.mark.browser

SHOTS = Path("/tmp") / "boss-agent-screens"  # where a person looks at what the page showed
UPDATES = 4  # several progress frames while the person types: one could land between keystrokes
QUESTION = [{"id": "why", "header": "Reason", "question": "Why this database?", "options": []}]
SCHEMA = {"type": "object", "properties": {"target": {"type": "string", "title": "Target host"}}}
TYPED = "because it needs no server"
SELECTED = (8, 26)  # "it needs no server": a selection, not only a caret at the end
RETYPED = "it is one file"  # typed over the selection that survived the updates
OTHER_REFS = {"codexThreadRef": "thr_other", "turnId": "turn_other"}  # its live turn: it can be steered

# The focused element, its value and its selection, as one answer.
_FOCUS = """
const n = document.activeElement;
return {inside: !!n.closest(arguments[0]), value: n.value ?? null,
        selection: [n.selectionStart ?? null, n.selectionEnd ?? null]};
"""


async def _stream(browser: Browser, device: Device, task_id: str, first_seq: int, other_id: str) -> None:
    """Progress on the task being answered, and on another task, until the page shows each."""
    task = f'[data-task-id="{task_id}"]'
    for n in range(UPDATES):
        preview = f"thinking, part {n}"
        card = {"version": 1, "status": "waitingInput", "answerPreview": preview,
                "steps": [{"title": f"step {i}", "status": "completed"} for i in range(n + 1)]}
        assert (await device.progress(task_id, first_seq + n, card)).status_code == 200
        await browser.wait_for(f"{task} .answer", preview)
        other = {"version": 1, "status": "running", "answerPreview": preview}
        assert (await device.post(f"/api/v1/master-agent/tasks/{other_id}/progress", {
            "seq": first_seq + n, "executionProgress": other, **OTHER_REFS})).status_code == 200
        await browser.wait_for(f'[data-task-id="{other_id}"] .answer', preview)


async def test_typed_answers_keep_their_text_selection_and_focus_while_progress_arrives(
        http, plane, tmp_path: Path):
    device = await pair(http, plane)
    other_id = plane.submit_task("something else")
    asked_id = plane.submit_task("pick a database")
    form_id = plane.submit_task("deploy it")
    await device.claim(slots=3)
    await device.ask(asked_id, "apr_q", kind="userInput", summary="A question", questions=QUESTION,
                     availableDecisions=["accept", "decline"])
    await device.ask(form_id, "apr_f", kind="elicitation", summary="MCP server deploy asks for input",
                     availableDecisions=["accept", "decline", "cancel"], message="Where to?", mode="form",
                     schema=SCHEMA)
    question = f'[data-task-id="{asked_id}"] [data-approval-id="apr_q"]'
    form = f'[data-task-id="{form_id}"] [data-approval-id="apr_f"]'
    async with chromium(tmp_path / "profile") as browser:
        await browser.open(plane.page_url)
        await browser.wait_for(f"{question} input.other")
        await browser.type(f"{question} input.other", TYPED)
        await browser.execute(f"document.querySelector('{question} input.other')"
                              ".setSelectionRange(arguments[0], arguments[1])", *SELECTED)
        await _stream(browser, device, asked_id, 1, other_id)
        plane.submit_task("a new task at the top of the list")  # the list grows above the question
        await browser.wait_for("#tasks .task .title", "a new task at the top")
        answering = await browser.execute(_FOCUS, question)
        await browser.type(f"{question} input.other", RETYPED)  # the live input: it replaces the selection

        await browser.type(f"{form} input[name=target]", "staging-1")
        await _stream(browser, device, form_id, 1 + UPDATES, other_id)
        filling = await browser.execute(_FOCUS, form)
        await browser.screenshot(SHOTS / "keyed-typing-desktop.png")

        steer = f'[data-task-id="{other_id}"] .compose'
        await browser.press(f'[data-task-id="{other_id}"] button.steer')
        await browser.type(f"{steer} textarea", "look at the tests first")
        await _stream(browser, device, form_id, 1 + 2 * UPDATES, other_id)
        steering = await browser.execute(_FOCUS, steer)

        async with asyncio.TaskGroup() as group:
            poll = group.create_task(device.poll(asked_id, "apr_q", wait_ms=30_000))
            await browser.click(f'{question} button[data-decision="answers"]')
            answer = await within(poll)
        await browser.wait_for(f'{question}[data-status="decided"] .decision', "answered")
        left = await browser.execute(f"return document.querySelectorAll('{question} .questions').length")
    assert answering == {"inside": True, "value": TYPED, "selection": list(SELECTED)}
    assert filling == {"inside": True, "value": "staging-1", "selection": [9, 9]}
    assert steering == {"inside": True, "value": "look at the tests first", "selection": [23, 23]}
    assert answer.json()["answers"] == {"why": ["because it is one file"]}
    assert left == 0  # decided: its form leaves the page, its summary and decision stay


async def test_a_typed_answer_survives_the_control_plane_restarting(db_path: Path, tmp_path: Path):
    """On a reconnect the page gets a whole new snapshot: the question still pending is kept, not redrawn."""
    question = '[data-approval-id="apr_q"]'
    async with chromium(tmp_path / "profile", size=PHONE) as browser:
        async with ControlPlane(db_path) as first, httpx.AsyncClient(base_url=first.url) as http:
            device = await pair(http, first)
            task_id = first.submit_task("pick a database")
            await device.claim()
            await device.ask(task_id, "apr_q", kind="userInput", summary="A question", questions=QUESTION,
                             availableDecisions=["accept", "decline"])
            await browser.open(first.page_url)
            await browser.type(f"{question} input.other", TYPED)
            port = urlsplit(first.url).port
        await browser.wait_for('#connection[data-state="offline"]')
        async with ControlPlane(db_path, port=port) as second:
            second.submit_task("submitted while the page was away")  # in the new snapshot only
            await browser.wait_for("#tasks .task .title", "while the page was away")
            kept = await browser.execute(_FOCUS, question)
            await browser.screenshot(SHOTS / "keyed-question-390.png")
    assert kept == {"inside": True, "value": TYPED, "selection": [len(TYPED), len(TYPED)]}


async def test_the_page_offers_what_the_servers_status_sets_say(http, plane, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch):
    """Retry is offered for the statuses the server lists as retryable, and no others:
    widen the server's set and a completed task is offered Retry, which the server then takes."""
    monkeypatch.setattr(queue, "RETRYABLE", queue.RETRYABLE | {"completed"})
    device = await pair(http, plane)
    done_id = plane.submit_task("finished work")
    await device.claim()
    assert (await device.complete(done_id)).status_code == 200
    queued_id = plane.submit_task("waiting for a device")
    done = f'[data-task-id="{done_id}"]'
    async with chromium(tmp_path / "profile", size=PHONE) as browser:
        await browser.open(plane.page_url)
        await browser.wait_for(f'{done}[data-status="completed"] button.retry')
        assert await browser.execute(f"return !!document.querySelector('[data-task-id=\"{queued_id}\"] button.cancel')")
        assert not await browser.execute(f"return !!document.querySelector('{done} button.cancel')")
        await browser.screenshot(SHOTS / "keyed-statuses-390.png")
        await browser.press(f"{done} button.retry")
        await browser.wait_for(f'{done}[data-status="queued"] .meta', "attempt 2")
    assert plane.task(done_id)["attempt"] == 2
