"""A small async W3C WebDriver client for headless Chromium, over plain HTTP (httpx).

Reusable by any browser test (the control-plane page smoke test, the end-to-end
test): ``async with chromium(tmp_path) as browser: await browser.open(url)``.

It is async on purpose: the server under test usually runs on the same event loop,
so a blocking client would stall the very server it waits for. Waiting is done in
the page by a MutationObserver (``wait_for``), bounded by the WebDriver script
timeout, never by sleeping and re-querying.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.support.ports import free_port

CHROMIUM = os.environ.get("BOSS_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("BOSS_TEST_CHROMEDRIVER", "/usr/bin/chromedriver")
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"  # the W3C key of an element reference
DRIVER_START_TIMEOUT_S = 30  # chromedriver prints its banner within a second or two, even on a busy box
DRIVER_STOP_TIMEOUT_S = 10  # chromedriver and its Chromium exit well within this after the session is deleted
WAIT_TIMEOUT_S = 15  # default bound for wait_for: a page update over SSE takes milliseconds
COMMAND_TIMEOUT_S = 60  # a session start launches Chromium, the slowest command we send
CHROMIUM_ARGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage",
)
DESKTOP = (1280, 1400)
PHONE = (390, 844)  # a common phone's CSS viewport
STALE_RETRIES = 5  # a redraw takes milliseconds; five in a row means the element keeps vanishing
MIN_WINDOW_WIDTH = 500  # Chromium will not make a window narrower: smaller sizes are emulated

_WAIT_SCRIPT = """
const [selector, text, done] = [arguments[0], arguments[1], arguments[arguments.length - 1]];
const check = () => {
  for (const node of document.querySelectorAll(selector)) {
    if (text === null || node.textContent.includes(text)) return true;
  }
  return false;
};
if (check()) { done(true); return; }
const observer = new MutationObserver(() => { if (check()) { observer.disconnect(); done(true); } });
observer.observe(document.documentElement, {subtree: true, childList: true, characterData: true, attributes: true});
"""


class WebDriverError(RuntimeError):
    pass


class Browser:
    """One WebDriver session."""

    def __init__(self, http: httpx.AsyncClient, session_id: str) -> None:
        self.http = http
        self.session_id = session_id

    async def command(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        url = f"/session/{self.session_id}{path}"
        response = await self.http.request(method, url, json=body if method == "POST" else None)
        value = response.json().get("value")
        if response.status_code != 200:
            message = value.get("message", "") if isinstance(value, dict) else value
            detail = str(message).splitlines()[0] if message else response.status_code
            raise WebDriverError(f"{method} {path}: {detail}")
        return value

    async def open(self, url: str) -> None:
        await self.command("POST", "/url", {"url": url})

    async def find(self, css: str) -> str:
        found = await self.command("POST", "/element", {"using": "css selector", "value": css})
        element: str = found[ELEMENT]
        return element

    async def click(self, css: str) -> None:
        # A live page may redraw the element between finding and clicking it: find it again.
        for attempt in range(STALE_RETRIES):
            try:
                await self.command("POST", f"/element/{await self.find(css)}/click", {})
                return
            except WebDriverError as exc:
                if "stale element" not in str(exc) or attempt == STALE_RETRIES - 1:
                    raise

    async def press(self, css: str) -> None:
        """Click ``css`` from inside the page, in one step: for buttons on a card that
        redraws live, where a pointer click could land after the layout moved."""
        found = await self.execute("const n = document.querySelector(arguments[0]); if (n) n.click(); return !!n;", css)
        if not found:
            raise WebDriverError(f"no {css!r} to press")

    async def type(self, css: str, text: str) -> None:
        await self.command("POST", f"/element/{await self.find(css)}/value", {"text": text})

    async def text(self, css: str) -> str:
        text: str = await self.command("GET", f"/element/{await self.find(css)}/text")
        return text

    async def attribute(self, css: str, name: str) -> str | None:
        value: str | None = await self.command("GET", f"/element/{await self.find(css)}/attribute/{name}")
        return value

    async def execute(self, script: str, *args: Any) -> Any:
        return await self.command("POST", "/execute/sync", {"script": script, "args": list(args)})

    async def wait_for(self, css: str, text: str | None = None, timeout_s: float = WAIT_TIMEOUT_S) -> None:
        """Until an element matching ``css`` (containing ``text``) exists; WebDriverError on timeout."""
        await self.command("POST", "/timeouts", {"script": int(timeout_s * 1000)})
        try:
            await self.command("POST", "/execute/async", {"script": _WAIT_SCRIPT, "args": [css, text]})
        except WebDriverError as exc:
            raise WebDriverError(f"no {css!r} with text {text!r} within {timeout_s} s ({exc})") from exc

    async def grant(self, permission: str) -> None:
        """Grant a permission (``notifications``) as if the person had allowed it."""
        await self.command("POST", "/permissions", {"descriptor": {"name": permission}, "state": "granted"})

    async def execute_async(self, script: str, *args: Any) -> Any:
        """Run ``script`` in the page; it ends by calling ``arguments[arguments.length - 1](result)``."""
        await self.command("POST", "/timeouts", {"script": int(WAIT_TIMEOUT_S * 1000)})
        return await self.command("POST", "/execute/async", {"script": script, "args": list(args)})

    async def screenshot(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(await self.command("GET", "/screenshot")))  # noqa: ASYNC240 - test artefact


async def _await_banner(proc: asyncio.subprocess.Process) -> None:
    assert proc.stdout is not None
    async with asyncio.timeout(DRIVER_START_TIMEOUT_S):
        while line := await proc.stdout.readline():
            if b"started successfully" in line:
                return
    raise WebDriverError("chromedriver exited before it was ready")


async def _drain(proc: asyncio.subprocess.Process) -> None:
    assert proc.stdout is not None
    while await proc.stdout.readline():
        pass  # keep the pipe empty so chromedriver never blocks writing its log


@dataclass(frozen=True)
class Netns:
    """Run the browser in network namespace ``name``; chromedriver there is reached at
    ``driver_ip`` from ``client_ip`` (the test's end of the namespace's veth)."""

    name: str
    driver_ip: str
    client_ip: str


@contextlib.asynccontextmanager
async def chromium(profile_dir: Path, size: tuple[int, int] = DESKTOP, *, netns: Netns | None = None,
                   extra_args: tuple[str, ...] = ()) -> AsyncIterator[Browser]:
    """Start chromedriver and a headless Chromium session (a ``size`` window); stop both on exit."""
    for binary in (CHROMIUM, CHROMEDRIVER):
        if not shutil.which(binary):
            raise WebDriverError(f"{binary} not found (apt-get install chromium chromium-driver)")
    port = free_port()
    prefix = ("ip", "netns", "exec", netns.name) if netns else ()
    driver_ip, client_ip = (netns.driver_ip, netns.client_ip) if netns else ("127.0.0.1", "127.0.0.1")
    proc = await asyncio.create_subprocess_exec(
        *prefix, CHROMEDRIVER, f"--port={port}", f"--allowed-ips={client_ip}",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )
    try:
        await _await_banner(proc)
        async with asyncio.TaskGroup() as group:
            drain = group.create_task(_drain(proc))
            try:
                async with httpx.AsyncClient(base_url=f"http://{driver_ip}:{port}", timeout=COMMAND_TIMEOUT_S) as http:
                    args = [*CHROMIUM_ARGS, f"--window-size={size[0]},{size[1]}", f"--user-data-dir={profile_dir}",
                            *extra_args]
                    options: dict[str, Any] = {"binary": CHROMIUM, "args": args}
                    if size[0] < MIN_WINDOW_WIDTH:
                        options["mobileEmulation"] = {"deviceMetrics": {
                            "width": size[0], "height": size[1], "pixelRatio": 1, "mobile": True, "touch": True}}
                    created = await http.post("/session", json={"capabilities": {"alwaysMatch": {
                        "browserName": "chrome", "goog:chromeOptions": options}}})
                    value = created.json()["value"]
                    if created.status_code != 200:
                        raise WebDriverError(f"cannot start Chromium: {value.get('message', '')[:300]}")
                    browser = Browser(http, value["sessionId"])
                    try:
                        yield browser
                    finally:
                        await http.delete(f"/session/{browser.session_id}")
            finally:
                proc.terminate()
                await proc.wait()
                # A Chromium child may still hold the pipe open; stop reading after a bound.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(DRIVER_STOP_TIMEOUT_S):
                        await asyncio.shield(drain)
                drain.cancel()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
