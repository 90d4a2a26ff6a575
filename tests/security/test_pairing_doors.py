"""Pairing's doors: per-client attempt limits, the code kept out of ``ps``, JWT secret size.

The control plane runs for real on loopback. The two clients of the attempt-limit test
are told apart by their source address (127.0.0.1 and 127.0.0.2, both loopback).
"""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import httpx
import pytest

from boss_agent.appserver import auth
from boss_agent.config import load_config
from boss_agent.controlplane.devices import MAX_FAILED_PAIRINGS
from boss_agent.errors import AppServerUnavailable
from boss_agent.identity import load_identity

from tests.support.controlplane import error_code
from tests.support.cli import cli_env, run_cli

REPO = Path(__file__).resolve().parents[2]
CLI_TIMEOUT_S = 60


def client_from(plane, source: str) -> httpx.AsyncClient:
    transport = httpx.AsyncHTTPTransport(local_address=source)
    return httpx.AsyncClient(base_url=plane.url, transport=transport, timeout=30)


async def test_wrong_codes_from_one_client_never_void_another_clients_code(plane):
    code = plane.create_pairing_code()
    async with client_from(plane, "127.0.0.1") as guesser, client_from(plane, "127.0.0.2") as owner:
        for attempt in range(MAX_FAILED_PAIRINGS + 3):
            wrong = await guesser.post("/api/v1/devices/pair", json={"pairingCode": f"{attempt:06d}"})
            assert wrong.status_code in (400, 429), wrong.text
        assert wrong.status_code == 429 and error_code(wrong) == "too_many_attempts"
        assert "retry-after" in wrong.headers
        right_from_guesser = await guesser.post("/api/v1/devices/pair", json={"pairingCode": code})
        assert right_from_guesser.status_code == 429  # the limit holds even for a right guess
        paired = await owner.post("/api/v1/devices/pair", json={"pairingCode": code, "deviceName": "mine"})
        assert paired.status_code == 201, paired.text


async def test_the_limit_lifts_after_its_window(plane, clock):
    async with client_from(plane, "127.0.0.1") as guesser:
        for attempt in range(MAX_FAILED_PAIRINGS):
            await guesser.post("/api/v1/devices/pair", json={"pairingCode": f"{attempt:06d}"})
        assert (await guesser.post("/api/v1/devices/pair", json={"pairingCode": "999999"})).status_code == 429
        clock.advance(3600)
        code = plane.create_pairing_code()
        assert (await guesser.post("/api/v1/devices/pair", json={"pairingCode": code})).status_code == 201


def run_pair(args: list[str], stdin: str, home: Path) -> subprocess.CompletedProcess[str]:
    return run_cli("pair", *args, input=stdin, env=cli_env(home, BOSS_STATE_DIR=str(home / "state")))


async def test_pair_reads_the_code_from_stdin_so_it_is_not_in_ps(plane, tmp_path: Path):
    code = plane.create_pairing_code()
    done = await asyncio.to_thread(run_pair, ["--server", plane.url, "--name", "cli"], code + "\n", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "paired: device dev_" in done.stdout and code not in done.stdout + done.stderr
    identity = load_identity(tmp_path / "state")
    assert identity is not None and identity.server_url == plane.url


async def test_pair_without_a_code_on_stdin_fails_with_one_line(plane, tmp_path: Path):
    done = await asyncio.to_thread(run_pair, ["--server", plane.url], "", tmp_path)
    assert done.returncode != 0 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "code" in done.stderr


@pytest.mark.parametrize("content", [b"", b"x", b"0123456789abcdef0123456789abcde"])  # 0, 1, 31 bytes
def test_a_jwt_shared_secret_under_32_bytes_is_refused(tmp_path: Path, content: bytes):
    secret = tmp_path / "jwt.secret"
    secret.write_bytes(content)
    settings = load_config(overrides={"codex.app_server_auth_shared_secret_file": str(secret)}, environ={}).codex
    with pytest.raises(AppServerUnavailable, match="32 bytes"):
        auth.bearer_token(settings)


def test_a_32_byte_jwt_shared_secret_mints_a_token(tmp_path: Path):
    secret = tmp_path / "jwt.secret"
    secret.write_bytes(b"0123456789abcdef0123456789abcdef")
    settings = load_config(overrides={"codex.app_server_auth_shared_secret_file": str(secret)}, environ={}).codex
    assert auth.bearer_token(settings).count(".") == 2


# ------------------------------------------------------------ the ws listener's port

class PortSquatter:
    """Another local process on the port the listener was to use (it won the race).

    It answers ``/readyz`` like codex and records every request's Authorization header.
    The race itself is made certain by handing its port to the connector in place of a
    free one (``free_loopback_port``): no real peer can lose a race on cue.
    """

    def __init__(self) -> None:
        self.authorizations: list[str] = []
        self.port = 0

    async def handle(self, request):
        from aiohttp import web

        self.authorizations.append(request.headers.get("Authorization", ""))
        if request.path == "/readyz":
            return web.Response(text="ok")
        return web.Response(status=404)


@pytest.fixture
async def squatter():
    from aiohttp import web

    squat = PortSquatter()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", squat.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    squat.port = runner.addresses[0][1]
    try:
        yield squat
    finally:
        await runner.cleanup()


@pytest.mark.codex
async def test_the_ws_listener_lets_codex_pick_its_port_so_a_squatter_gets_nothing(
        squatter, monkeypatch, codex_bin, codex_home, workdir, tmp_path, scripted_model):
    from boss_agent.appserver import connect
    from boss_agent.appserver.client import AppServer
    from boss_agent.demo import scripted_model as sm
    from tests.support.appserver import codex_settings, run_turn

    monkeypatch.setattr(connect, "free_loopback_port", lambda: squatter.port, raising=False)
    scripted_model.enqueue(sm.turn(sm.message("Hello world!", ["Hello ", "world!"])))
    settings = codex_settings(codex_bin, app_server_transport="ws")
    async with AppServer(settings, state_dir=tmp_path / "state", codex_home=codex_home) as app:
        completed = await run_turn(app, workdir)
        assert app.status["transport"] == "ws" and app.status["fallbackFrom"] is None, app.status
    assert completed["text"] == "Hello world!"
    assert not any(squatter.authorizations), "the listener's token went to another process"
