"""The page on a phone-sized Chromium drives a whole conversation: submit, approve, steer
the running turn, continue the finished thread, look at the thread, and a computer-use
task type. Real control plane, a daemon on real codex with the scripted model (so the
test reads what the model was sent), one slot. Screenshots land in ``test-artifacts/``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from boss_agent.controlplane import ControlPlane
from boss_agent.demo import scripted_model as sm
from tests.support.config import make_config
from tests.support.daemon import paired_daemon
from tests.support.webdriver import PHONE, chromium

pytestmark = [pytest.mark.browser, pytest.mark.codex]

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
TURN_TIMEOUT_S = 50  # a scripted turn takes seconds; under the WebDriver client's 60 s command timeout

_RECORD_ERRORS = "window.pageErrors = []; window.addEventListener('error', (e) => window.pageErrors.push(e.message));"
_VISIBLE_TASKS_TOP_DOWN = """
return [...document.querySelectorAll('#tasks .task')]
  .filter((n) => !n.hidden)
  .sort((a, b) => a.getBoundingClientRect().top - b.getBoundingClientRect().top)
  .map((n) => n.dataset.taskId);
"""


async def _compose(browser, task: str, button: str, text: str) -> str:
    """Open ``task``'s steer/continue box, send ``text``; the new task's id."""
    await browser.press(f"{task} button.{button}")
    await browser.type(f"{task} .compose textarea", text)
    await browser.press(f"{task} .compose button[type=submit]")
    await browser.wait_for(f"{task} .compose-status[data-sent-task-id]")
    return await browser.attribute(f"{task} .compose-status", "data-sent-task-id")


# A steer into a hung response: a codex before 0.169 holds it until the response ends.
@pytest.mark.codex_feature("immediate_steer")
async def test_on_a_phone_the_page_submits_approves_steers_and_continues_a_thread(
    tmp_path: Path, codex_bin: str, codex_home: Path, workdir: Path, scripted_model: sm.ScriptedModel,
) -> None:
    scripted_model.enqueue(
        sm.turn(sm.shell_call("echo checked", sandbox_permissions="require_escalated",
                              justification="the test asks before it runs a command")),
        sm.hang(sm.message("still working")),
        sm.text_reply("steered answer"),
        sm.text_reply("second turn answer"))
    async with ControlPlane(tmp_path / "cp" / "boss.db") as plane:
        config = make_config(tmp_path, server_url=plane.url, workspace=tmp_path,
                             codex__bin=codex_bin, max_concurrent_tasks=1)
        async with (paired_daemon(config, plane.url, plane.create_pairing_code(), codex_home),
                    chromium(tmp_path / "profile", size=PHONE) as browser):
            await browser.open(plane.page_url)
            await browser.wait_for("#connection[data-state=live]")
            await browser.execute(_RECORD_ERRORS)
            await browser.type("#submit-form textarea[name=prompt]", "a long job")
            await browser.type("#submit-form input[name=workdir]", str(workdir))
            await browser.click("#submit-form button[type=submit]")
            await browser.wait_for("#submit-status[data-task-id]")
            first_id = await browser.attribute("#submit-status", "data-task-id")
            first = f'[data-task-id="{first_id}"]'

            accept = f'{first} .approval[data-status="pending"] button[data-decision="accept"]'
            await browser.wait_for(accept, timeout_s=TURN_TIMEOUT_S)
            await browser.press(accept)
            await browser.wait_for(f"{first} button.steer", timeout_s=TURN_TIMEOUT_S)
            await asyncio.to_thread(scripted_model.wait_for_requests, 2, TURN_TIMEOUT_S)
            steer_id = await _compose(browser, first, "steer", "focus on the tests")
            await browser.wait_for(f'{first}[data-status="completed"]', timeout_s=TURN_TIMEOUT_S)
            await browser.wait_for(f'[data-task-id="{steer_id}"][data-status="completed"]', timeout_s=TURN_TIMEOUT_S)
            assert "focus on the tests" in scripted_model.requests[2].input_texts()

            follow_id = await _compose(browser, first, "continue", "and now?")
            await browser.wait_for(f'[data-task-id="{follow_id}"][data-status="completed"] .answer',
                                   "second turn answer", timeout_s=TURN_TIMEOUT_S)
            continued = scripted_model.requests[3].input_texts()
            assert "a long job" in continued and "and now?" in continued  # the model saw the earlier turn

            await browser.click(f'[data-task-id="{follow_id}"] button.thread')
            await browser.wait_for("#thread-bar:not([hidden])")
            assert await browser.execute(_VISIBLE_TASKS_TOP_DOWN) == [first_id, steer_id, follow_id]
            await browser.screenshot(ARTIFACTS / "remote-thread-phone.png")
            await browser.click("#thread-bar button")

            await browser.click("#submit-form select[name=intentCategory] option[value=computer_use]")
            await browser.type("#submit-form textarea[name=prompt]", "open the editor")
            await browser.click("#submit-form button[type=submit]")
            await browser.wait_for(f'#submit-status[data-task-id]:not([data-task-id="{first_id}"])')
            desktop_id = await browser.attribute("#submit-status", "data-task-id")
            assert plane.task(desktop_id)["task"]["intentCategory"] == "computer_use"
            await browser.wait_for(f'[data-task-id="{desktop_id}"] .meta', "computer use")

            assert await browser.execute("return window.pageErrors") == []
            width = await browser.execute("return [document.documentElement.scrollWidth, window.innerWidth]")
            await browser.screenshot(ARTIFACTS / "remote-page-phone.png")
    # On a phone a page wider than the screen also widens the layout viewport (innerWidth).
    scroll_width, inner_width = width
    assert scroll_width <= inner_width <= PHONE[0], f"the page does not fit a {PHONE[0]} px screen: {width}"
