"""A reverse proxy on this machine that keeps ``Host``, as ``tailscale serve`` does.

The proxy is a real one on loopback (aiohttp: it forwards every request with its
headers, ``Host`` included, adds ``X-Forwarded-For`` and ``X-Forwarded-Proto: https``,
and streams the answer back). The phone behind it calls the page by its public name.
Without ``local.public_origins`` the control plane refuses that name; with it, the
phone pairs and works, and only a phone credential does: the secret is for loopback.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from aiohttp import ClientSession, web

from boss_agent.controlplane import ControlPlane

pytest.register_assert_rewrite("tests.support.controlplane")  # before the import, for its asserts
from tests.support.controlplane import HTTP_TIMEOUT_S, error_code  # noqa: E402

pytest_plugins = ("tests.support.controlplane",)  # its fixtures: db_path

PUBLIC = "https://box.tail1234.ts.net"
PHONE_ADDRESS = "100.101.102.103"  # the tailnet address the proxy reports the phone by
HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class KeepHostProxy:
    """Forwards to ``target`` keeping ``Host``, the way ``tailscale serve`` does."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.url = ""

    async def forward(self, request: web.Request) -> web.StreamResponse:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        headers.update({"Host": request.headers["Host"], "X-Forwarded-For": PHONE_ADDRESS,
                        "X-Forwarded-Proto": "https"})
        async with ClientSession(auto_decompress=False) as session, session.request(
                request.method, self.target + request.path_qs, headers=headers, data=await request.read(),
                allow_redirects=False) as upstream:
            response = web.StreamResponse(status=upstream.status, headers={
                k: v for k, v in upstream.headers.items() if k.lower() not in HOP_HEADERS})
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response


@pytest.fixture
async def proxied(db_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[tuple[ControlPlane, str]]:
    origins = request.param
    async with ControlPlane(db_path, public_origins=origins) as plane:
        proxy = KeepHostProxy(plane.url)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", proxy.forward)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        try:
            yield plane, f"http://127.0.0.1:{runner.addresses[0][1]}"
        finally:
            await runner.cleanup()


def phone_client(proxy_url: str) -> httpx.AsyncClient:
    """The phone's browser as the proxy sees it: its public name in Host and Origin."""
    host = PUBLIC.removeprefix("https://")
    return httpx.AsyncClient(base_url=proxy_url, timeout=HTTP_TIMEOUT_S, headers={"Host": host, "Origin": PUBLIC})


@pytest.mark.parametrize("proxied", [()], indirect=True)
async def test_without_public_origins_the_proxy_s_name_is_refused(proxied):
    plane, proxy_url = proxied
    async with phone_client(proxy_url) as phone:
        for method, path in (("GET", "/"), ("POST", "/api/local/phones/pair")):
            refused = await phone.request(method, path, json={"code": "x"})
            assert refused.status_code == 403 and error_code(refused) == "forbidden_host", path


@pytest.mark.parametrize("proxied", [(PUBLIC,)], indirect=True)
async def test_with_public_origins_a_phone_behind_the_proxy_pairs_and_works(proxied):
    plane, proxy_url = proxied
    offer = plane.create_phone_code()
    assert offer["url"].startswith(f"{PUBLIC}/#pair=") and offer["fingerprint"] is None
    async with phone_client(proxy_url) as phone:
        page = await phone.get("/")
        assert page.status_code == 200 and 'id="submit-form"' in page.text
        owner = await phone.get("/api/local/state", headers={"Authorization": f"Bearer {plane.secret}"})
        assert owner.status_code == 401  # the secret is for loopback only
        paired = await phone.post("/api/local/phones/pair", json={"code": offer["code"], "name": "tailnet phone"})
        assert paired.status_code == 201, paired.text
        assert paired.headers["set-cookie"].startswith("__Host-boss_phone=")  # the phone sees https
        token = paired.json()["token"]
        submitted = await phone.post("/api/local/tasks", json={"prompt": "from the tailnet"},
                                     headers={"Authorization": f"Bearer {token}"})
        assert submitted.status_code == 201, submitted.text
        foreign = await phone.post("/api/local/tasks", json={"prompt": "x"},
                                   headers={"Authorization": f"Bearer {token}", "Origin": "https://evil.example"})
        assert foreign.status_code == 403 and error_code(foreign) == "forbidden_origin"
        loopback_origin = await phone.post("/api/local/tasks", json={"prompt": "x"},
                                           headers={"Authorization": f"Bearer {token}", "Origin": plane.url})
        assert loopback_origin.status_code == 403
        for _ in range(10):  # wrong codes count against the phone's address, not the proxy's
            assert (await phone.post("/api/local/phones/pair", json={"code": "ZZZZZ-ZZZZZ"})).status_code == 400
        assert (await phone.post("/api/local/phones/pair", json={"code": "ZZZZZ-ZZZZZ"})).status_code == 429
    async with httpx.AsyncClient(base_url=plane.url) as local:
        assert (await local.post("/api/local/phones/pair", json={"code": "ZZZZZ-ZZZZZ"})).status_code == 400
        spoofed = await local.get("/api/health", headers={"Host": "box.tail1234.ts.net.evil.example"})
        assert spoofed.status_code == 403
    assert [t["task"]["prompt"] for t in plane.tasks()] == ["from the tailnet"]
