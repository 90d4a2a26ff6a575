"""The page's session: a cookie that is never the secret, expires, and dies with rotation.

Browsers send a 127.0.0.1 cookie to every port of 127.0.0.1, so any local web server
the user visits (a project's dev server, often started by a Codex task) receives it.
The Chromium test plays that server for real: a second aiohttp app on another port
that records the Cookie header it is sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from aiohttp import web

from boss_agent.controlplane import ControlPlane
from boss_agent.controlplane.security import SESSION_TTL_S, secret_path
from boss_agent.errors import ConfigError
from tests.support.webdriver import chromium
from tests.support.cli import cli_env, run_cli

pytest.register_assert_rewrite("tests.support.controlplane")  # before the import, for its asserts
from tests.support.controlplane import EVENT_TIMEOUT_S, error_code  # noqa: E402

pytest_plugins = ("tests.support.controlplane",)  # its fixtures: plane, http, clock, db_path


async def open_session(plane: ControlPlane) -> str:
    """Go through the ``?token=`` door as the browser does; the session the page script keeps."""
    async with httpx.AsyncClient(base_url=plane.url) as client:
        door = await client.get("/", params={"token": plane.secret})
        assert door.status_code == 303, door.text
        assert "set-cookie" not in door.headers  # nothing the browser would send by itself
        location = door.headers["location"]
        assert location.startswith("/#session="), location  # a fragment never reaches a server
    return location.split("=", 1)[1]


def bearer(session: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {session}"}


async def test_the_session_is_not_the_secret_and_works_only_in_the_header_the_page_script_sets(http, plane):
    session = await open_session(plane)
    assert plane.secret not in session
    assert (await http.get("/api/local/state", headers=bearer(session))).status_code == 200
    port = httpx.URL(plane.url).port
    as_cookie = await http.get("/api/local/state", headers={"Cookie": f"boss_cp_{port}={session}"})
    assert as_cookie.status_code == 401 and error_code(as_cookie) == "unauthorized"
    assert (await http.get("/", params={"token": session})).status_code == 401
    expiry, nonce, mac = session.split(".")
    forged = f"{int(expiry) + 10 * SESSION_TTL_S}.{nonce}.{mac}"
    assert (await http.get("/api/local/state", headers=bearer(forged))).status_code == 401


async def test_a_captured_cookie_alone_reads_and_changes_nothing(plane):
    """What an unrelated local server does with a cookie it was sent: nothing works."""
    async with httpx.AsyncClient(base_url=plane.url) as browser:
        door = await browser.get("/", params={"token": plane.secret}, follow_redirects=False)
        assert door.status_code == 303
        location = door.headers["location"]
        if "#session=" in location:  # as a cookie, where a browser would send it by itself
            browser.cookies.set(f"boss_cp_{httpx.URL(plane.url).port}", location.split("=", 1)[1])
        for method, path in (("GET", "/api/local/state"), ("POST", "/api/local/tasks"),
                             ("POST", "/api/local/pairing-codes"), ("GET", "/api/local/events")):
            response = await browser.request(method, path, json={"prompt": "x"})
            assert response.status_code == 401, (method, path)
    assert plane.tasks() == []


async def test_a_session_expires(http, plane, clock):
    session = await open_session(plane)
    clock.advance(SESSION_TTL_S - 60)
    assert (await http.get("/api/local/state", headers=bearer(session))).status_code == 200
    clock.advance(120)
    assert (await http.get("/api/local/state", headers=bearer(session))).status_code == 401


async def test_rotating_the_secret_voids_every_session_and_printed_url(http, plane, db_path):
    session = await open_session(plane)
    old_secret, old_url = plane.secret, plane.page_url
    new_secret = plane.rotate_secret()
    assert new_secret != old_secret and secret_path(db_path).read_text().strip() == new_secret
    assert (await http.get("/api/local/state", headers=bearer(session))).status_code == 401
    assert (await http.get(old_url)).status_code == 401
    assert (await http.get("/api/local/state", headers={"Authorization": f"Bearer {old_secret}"})).status_code == 401
    assert (await http.get(plane.page_url)).status_code == 303


async def test_a_restart_with_rotate_secret_voids_the_previous_url(db_path):
    async with ControlPlane(db_path) as first:
        old_secret = first.secret
    async with ControlPlane(db_path, rotate_secret=True) as second, httpx.AsyncClient(base_url=second.url) as http:
        assert second.secret != old_secret
        assert (await http.get("/", params={"token": old_secret})).status_code == 401


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "::", "example.com"])
def test_a_non_loopback_listen_address_is_refused(db_path, host):
    with pytest.raises(ConfigError, match="loopback"):
        ControlPlane(db_path, host=host)


@pytest.mark.parametrize("command", ["up", "devserver"])
def test_the_cli_refuses_a_non_loopback_host_with_one_line_and_exit_2(tmp_path: Path, command):
    done = run_cli(command, "--host", "0.0.0.0", "--port", "0", env=cli_env(tmp_path))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert len(done.stderr.strip().splitlines()) == 1 and "loopback" in done.stderr
    assert "token=" not in done.stdout + done.stderr


class CookieCatcher:
    """Another local web server (a dev server the user visits) recording the cookies it gets."""

    def __init__(self) -> None:
        self.cookies: list[str] = []
        self.visited = asyncio.Event()
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.cookies.append(request.headers.get("Cookie", ""))
        self.visited.set()
        return web.Response(text="<html><body>dev server</body></html>", content_type="text/html")


@pytest.fixture
async def catcher() -> AsyncIterator[CookieCatcher]:
    catcher = CookieCatcher()
    app = web.Application()
    app.router.add_get("/", catcher.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    catcher.url = f"http://127.0.0.1:{runner.addresses[0][1]}/"
    try:
        yield catcher
    finally:
        await runner.cleanup()


async def page_api_status(browser) -> int:
    """A request of the page's own, without the header its script adds: cookies only."""
    return await browser.execute(
        "return await fetch('/api/local/state', {credentials: 'same-origin'}).then(r => r.status)")


@pytest.mark.browser
async def test_another_local_port_gets_no_cookie_and_rotation_locks_the_browser_out(
        plane, http, catcher, tmp_path: Path):
    async with chromium(tmp_path / "profile") as browser:
        await browser.open(plane.page_url)
        await browser.wait_for('#connection[data-state="live"]')
        assert await page_api_status(browser) == 401  # the session is in the script's header only
        await browser.open(catcher.url)
        async with asyncio.timeout(EVENT_TIMEOUT_S):
            await catcher.visited.wait()
        sent = catcher.cookies[-1]
        assert "boss_cp_" not in sent and plane.secret not in sent, sent

        await browser.open(plane.url + "/")  # the session survives a reload, in this origin only
        await browser.wait_for('#connection[data-state="live"]')
        plane.rotate_secret()
        await browser.open(plane.url + "/")
        await browser.wait_for('#connection[data-state="unauthorized"]')
