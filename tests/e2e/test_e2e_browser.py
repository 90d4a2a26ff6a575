"""End to end, as a user runs it: `boss-agent up --demo`, then the web page in a real browser.

A real ``python -m boss_agent up --demo --port 0`` process (control plane, daemon,
real codex app-server, the built-in demo model), a real headless Chromium driven
through chromedriver. The task is submitted on the page, its command approval is
clicked on the page, and the page shows the finished card; the demo's file lands in
the project. Then SIGTERM stops `up` cleanly. The final page is saved to
``test-artifacts/e2e-final-page.png``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from boss_agent.demo.model import DEMO_FILE
from tests.support.e2e import CANARY, PROMPT_WORD, UpProcess
from tests.support.webdriver import chromium

pytestmark = [pytest.mark.browser, pytest.mark.codex]

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
TASK_TIMEOUT_S = 50  # a demo turn takes seconds; the bound stays under the WebDriver client's 60 s command timeout
DEMO_STEPS = ["Look at the project", "Write a note", "Answer"]
PROMPT = f"Show me what boss-agent can do, {PROMPT_WORD}. My key is {CANARY}, do not share it."

# The page's text without the task titles: a title is the first line of the user's own
# prompt (with secrets masked); everything else (the card, approvals, results) is what
# the device reported and must never carry the prompt at all.
_TEXT_BUT_TITLES = """
const copy = document.body.cloneNode(true);
copy.querySelectorAll('.task-head .title').forEach((node) => node.remove());
return copy.textContent;
"""


@pytest.fixture
def up(tmp_path: Path, codex_bin: str):
    process = UpProcess(tmp_path, codex_bin)
    yield process
    if process.proc is not None and process.proc.poll() is None:
        process.stop()


async def _submit_on_the_page(browser, workdir: Path) -> str:
    await browser.type("#submit-form textarea[name=prompt]", PROMPT)
    await browser.type("#submit-form input[name=workdir]", str(workdir))
    await browser.click("#submit-form button[type=submit]")
    await browser.wait_for("#submit-status[data-task-id]", "queued")
    return await browser.attribute("#submit-status", "data-task-id")


async def _texts(browser, css: str) -> list[str]:
    return await browser.execute("return [...document.querySelectorAll(arguments[0])].map((n) => n.textContent)", css)


async def test_a_task_submitted_and_approved_on_the_page_completes_and_up_stops_cleanly(up: UpProcess, tmp_path: Path):
    page_url = await asyncio.to_thread(up.start)
    project = up.project("demo-project")

    async with chromium(tmp_path / "profile") as browser:
        await browser.open(page_url)
        await browser.wait_for("#connection[data-state=live]")
        await browser.wait_for(".device .name", "this machine")
        task_id = await _submit_on_the_page(browser, project)
        task = f'[data-task-id="{task_id}"]'

        accept = f'{task} .approval[data-status="pending"] button[data-decision="accept"]'
        await browser.wait_for(accept, timeout_s=TASK_TIMEOUT_S)
        await browser.wait_for(f"{task} .status", "waitingApproval")
        assert "Run ls" in await browser.text(f'{task} .approval[data-status="pending"] .summary')
        await browser.screenshot(ARTIFACTS / "e2e-approval-page.png")
        await browser.click(accept)

        await browser.wait_for(f'{task}[data-status="completed"] .status', "completed", timeout_s=TASK_TIMEOUT_S)
        assert await _texts(browser, f'{task} .step[data-status="completed"]') == DEMO_STEPS
        assert await _texts(browser, f"{task} .file-change") == [f"add {DEMO_FILE}"]
        assert await _texts(browser, f"{task} .reasoning strong") == ["Planning"]  # codex's **headline**
        assert "decided: accept" in await browser.text(f"{task} .approval .decision")
        assert await _texts(browser, f"{task} .answer-section h3") == ["Result"]  # the final result, not a preview
        answer = await browser.text(f"{task} .answer")
        assert answer.startswith(f"Done. I looked at the project and wrote {DEMO_FILE}.")
        # A finished task offers only a follow-up on its thread and the thread's view.
        assert await _texts(browser, f"{task} button") == ["Continue", "Thread"]
        await browser.screenshot(ARTIFACTS / "e2e-final-page.png")

        shown = await browser.execute(_TEXT_BUT_TITLES)
        cards = await browser.execute("return Array.from(document.querySelectorAll('.card'), (n) => n.outerHTML)")
        title = await browser.text(f"{task} .title")
        assert PROMPT_WORD in title  # the search below can see the prompt
        assert CANARY not in title and "[redacted]" in title  # a pasted key is masked even in the title
        assert CANARY not in await browser.execute("return document.body.textContent")
        for planted in (CANARY, PROMPT_WORD):
            assert planted not in shown and planted not in "".join(cards)

    assert (project / DEMO_FILE).read_text(encoding="utf-8").startswith("# Written by the boss-agent demo")
    assert await asyncio.to_thread(up.stop) == 0
    written = up.everything_written()
    assert f"task {task_id} completed" in written  # the log is really there to search
    assert "CANARY" not in written and PROMPT_WORD not in written
    for name, value in up.credentials().items():
        assert len(value) >= 20 and value not in up.logged(), f"the {name} is in a log line"
    assert up.credentials()["device token"] not in up.stdout.text()
