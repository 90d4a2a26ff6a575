"""Malformed credentials, Host headers and bodies at the control plane: a 4xx, never a 500.

Each request here is one a local process (or a page the user opened) can send without
knowing anything: it must be refused with the contract's error shape, and nothing about
it may leave a traceback in the log.
"""

from __future__ import annotations

import logging

import httpx
import pytest

from tests.support.controlplane import error_code, pair

NESTING = 200_000  # far beyond the JSON decoder's recursion limit


def no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    logged = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not logged, [r.getMessage() for r in logged]


@pytest.mark.parametrize("credential", [
    b"Bearer \xc3\xa9t\xc3\xa9",          # UTF-8 non-ASCII
    b"Bearer \xff\xfe\xfd",               # not UTF-8 at all
    b"Bearer " + b"A" * 7000,             # oversized, still under aiohttp's header limit
])
async def test_a_malformed_bearer_is_a_401_on_local_and_device_endpoints(http, plane, caplog, credential):
    caplog.set_level(logging.DEBUG)
    for method, path in (("GET", "/api/local/tasks"), ("POST", "/api/v1/devices/heartbeat")):
        response = await http.request(method, path, headers={"Authorization": credential}, json={})
        assert response.status_code == 401, (path, response.status_code, response.text)
        error_code(response)
    no_traceback(caplog)


@pytest.mark.parametrize("value", [b"\xc3\xa9t\xc3\xa9", b"\xff\xfe", b"A" * 7000])
async def test_a_malformed_cookie_or_page_token_is_a_401(http, plane, caplog, value):
    caplog.set_level(logging.DEBUG)
    port = httpx.URL(plane.url).port
    response = await http.get("/api/local/tasks", headers={"Cookie": b"boss_cp_%d=" % port + value})
    assert response.status_code == 401, response.text
    response = await http.get("/", params={"token": value.decode("utf-8", "replace")})
    assert response.status_code == 401, response.text
    raw = await http.get("/?token=%ff%fe")
    assert raw.status_code == 401, raw.text
    no_traceback(caplog)


async def test_deeply_nested_json_is_invalid_json_not_a_500(http, plane, caplog):
    caplog.set_level(logging.DEBUG)
    device = await pair(http, plane)
    secret = {"Authorization": f"Bearer {plane.secret}"}
    for body in (b"[" * NESTING, b'{"a":' * NESTING):
        for path, headers in (("/api/v1/devices/pair", {}), ("/api/v1/devices/heartbeat", device.headers),
                              ("/api/local/tasks", secret)):
            response = await http.post(path, content=body, headers={"Content-Type": "application/json", **headers})
            assert response.status_code == 400, (path, response.status_code, response.text)
            assert error_code(response) == "invalid_json"
    no_traceback(caplog)


async def test_an_oversized_body_is_a_413_with_the_error_shape(http, plane, caplog):
    caplog.set_level(logging.DEBUG)
    secret = {"Authorization": f"Bearer {plane.secret}"}
    response = await http.post("/api/local/tasks", content=b'{"prompt":"' + b"x" * (9 * 1024 * 1024) + b'"}',
                               headers={"Content-Type": "application/json", **secret})
    assert response.status_code == 413, response.text
    error_code(response)
    no_traceback(caplog)


@pytest.mark.parametrize("host", [
    "127.0.0.1:{port}@evil.com", "evil.com@127.0.0.1:{port}", "evil.localhost:{port}", "app.localhost",
    "127.0.0.1:abc", "127.0.0.1:{port}:1", "127.0.0.1:", "127.0.0.1:-1", "localhost:{port} evil.com",
    "[::1]x:{port}", "[::1", "127.0.0.1:\u0661\u0662",
])
async def test_a_host_header_is_parsed_strictly(http, plane, host):
    port = httpx.URL(plane.url).port
    response = await http.get("/api/health", headers={"Host": host.format(port=port).encode("utf-8")})
    assert response.status_code in (400, 403), (host, response.status_code)
    if response.status_code == 403:
        assert error_code(response) == "forbidden_host"


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST.:{port}", "[::1]:{port}",
                                  "127.0.0.2", "localhost"])
async def test_loopback_host_headers_still_pass(http, plane, host):
    port = httpx.URL(plane.url).port
    response = await http.get("/api/health", headers={"Host": host.format(port=port)})
    assert response.status_code == 200, host
