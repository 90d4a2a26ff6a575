"""The app-server client over each transport, against the real codex binary.

One contract test runs a whole turn over stdio, ws and unix (the latter two with a
listener the client starts itself). The auth tests start codex's WebSocket listener
with capability-token or signed-JWT auth and check both success and the error codex
gives for each kind of bad credential.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from boss_agent.demo import scripted_model as sm
from boss_agent.appserver import auth
from boss_agent.appserver.client import AppServer
from boss_agent.appserver.connect import dial, write_private
from boss_agent.errors import AppServerUnavailable, AuthRejected
from tests.support.appserver import Listener, codex_settings, run_turn

pytestmark = pytest.mark.codex

SECRET = b"0123456789abcdef0123456789abcdef-boss-agent-test"  # codex needs >= 32 bytes


@pytest.mark.parametrize("transport", ["stdio", "ws", "unix"])
async def test_every_transport_completes_a_turn(
    transport: str, codex_bin: str, codex_release: str, codex_home: Path, workdir: Path, tmp_path: Path,
    scripted_model: sm.ScriptedModel,
) -> None:
    scripted_model.enqueue(sm.turn(sm.message("Hello world!", ["Hello ", "world!"])))
    settings = codex_settings(codex_bin, app_server_transport=transport)
    async with AppServer(settings, state_dir=tmp_path / "state", codex_home=codex_home) as app:
        assert app.status == {"available": True, "version": codex_release, "transport": transport,
                              "fallbackFrom": None, "error": None}
        completed = await run_turn(app, workdir)
    assert completed["turn"]["status"] == "completed"
    assert completed["text"] == "Hello world!"
    assert "say hello" in scripted_model.requests[0].input_texts()
    if transport != "stdio":
        token = tmp_path / "state" / "app-server" / "listener.token"
        assert token.stat().st_mode & 0o777 == 0o600


# ------------------------------------------------------------------ auth


@pytest.fixture
def token_listener(codex_bin: str, codex_home: Path, tmp_path: Path) -> Iterator[tuple[Listener, Path]]:
    token_file = tmp_path / "cap.token"
    write_private(token_file, "capability-token-for-tests\n")
    listener = Listener(codex_bin, codex_home, ["--ws-auth", "capability-token",
                                                "--ws-token-file", str(token_file)])
    yield listener, token_file
    listener.stop()


@pytest.fixture
def jwt_listener(codex_bin: str, codex_home: Path, tmp_path: Path) -> Iterator[tuple[Listener, Path]]:
    secret_file = tmp_path / "jwt.secret"
    secret_file.write_bytes(SECRET)
    listener = Listener(codex_bin, codex_home, [
        "--ws-auth", "signed-bearer-token", "--ws-shared-secret-file", str(secret_file),
        "--ws-issuer", "boss-agent", "--ws-audience", "codex-app-server"])
    yield listener, secret_file
    listener.stop()


async def test_a_capability_token_opens_the_websocket_and_runs_a_turn(
    token_listener: tuple[Listener, Path], codex_bin: str, workdir: Path, tmp_path: Path,
    scripted_model: sm.ScriptedModel,
) -> None:
    listener, token_file = token_listener
    await listener.ready()
    scripted_model.enqueue(sm.text_reply("over ws"))
    settings = codex_settings(codex_bin, app_server_transport="ws", app_server_url=listener.url,
                              app_server_auth_token_file=token_file)
    async with AppServer(settings, state_dir=tmp_path / "state") as app:
        assert app.status["transport"] == "ws" and app.status["fallbackFrom"] is None
        assert (await run_turn(app, workdir))["text"] == "over ws"


async def test_a_wrong_capability_token_is_rejected_with_codexs_reason(
    token_listener: tuple[Listener, Path],
) -> None:
    listener, _ = token_listener
    await listener.ready()
    with pytest.raises(AuthRejected) as rejected:
        await dial(listener.url, "not-the-token")
    assert rejected.value.status == 401
    assert "invalid websocket bearer token" in str(rejected.value)
    with pytest.raises(AuthRejected, match="missing websocket bearer token"):
        await dial(listener.url, None)


async def test_a_signed_jwt_opens_the_websocket_and_runs_a_turn(
    jwt_listener: tuple[Listener, Path], codex_bin: str, workdir: Path, tmp_path: Path,
    scripted_model: sm.ScriptedModel,
) -> None:
    listener, secret_file = jwt_listener
    await listener.ready()
    scripted_model.enqueue(sm.text_reply("signed"))
    settings = codex_settings(codex_bin, app_server_transport="ws", app_server_url=listener.url,
                              app_server_auth_shared_secret_file=secret_file,
                              app_server_auth_issuer="boss-agent",
                              app_server_auth_audience="codex-app-server")
    async with AppServer(settings, state_dir=tmp_path / "state") as app:
        assert app.status["transport"] == "ws"
        assert (await run_turn(app, workdir))["text"] == "signed"


@pytest.mark.parametrize(("secret", "claims", "reason"), [
    (b"x" * 40, {}, "invalid websocket jwt"),
    (SECRET, {"now": 1_000_000_000.0}, "expired websocket jwt"),
    (SECRET, {"audience": "someone-else"}, "websocket jwt audience mismatch"),
    (SECRET, {"issuer": "mallory"}, "websocket jwt issuer mismatch"),
], ids=["wrong-secret", "expired", "wrong-audience", "wrong-issuer"])
async def test_a_bad_jwt_is_rejected_naming_the_cause(
    jwt_listener: tuple[Listener, Path], secret: bytes, claims: dict[str, Any], reason: str,
) -> None:
    listener, _ = jwt_listener
    await listener.ready()
    token = auth.mint_hs256_jwt(secret, **{"issuer": "boss-agent", "audience": "codex-app-server",
                                           **claims})
    with pytest.raises(AuthRejected) as rejected:
        await dial(listener.url, token)
    assert rejected.value.status == 401
    assert reason in str(rejected.value)
    assert token not in str(rejected.value)


async def test_a_rejected_listener_falls_back_to_stdio_and_says_why(
    token_listener: tuple[Listener, Path], codex_bin: str, codex_home: Path, workdir: Path,
    tmp_path: Path, scripted_model: sm.ScriptedModel,
) -> None:
    listener, _ = token_listener
    await listener.ready()
    wrong = tmp_path / "wrong.token"
    write_private(wrong, "wrong")
    scripted_model.enqueue(sm.text_reply("fallback works"))
    settings = codex_settings(codex_bin, app_server_transport="ws", app_server_url=listener.url,
                              app_server_auth_token_file=wrong)
    async with AppServer(settings, state_dir=tmp_path / "state", codex_home=codex_home) as app:
        status = app.status
        assert status["available"] and status["transport"] == "stdio"
        assert status["fallbackFrom"] == "ws"
        assert "invalid websocket bearer token" in status["error"]
        assert (await run_turn(app, workdir))["text"] == "fallback works"


async def test_an_unreachable_unix_socket_falls_back_to_stdio(
    codex_bin: str, codex_home: Path, tmp_path: Path,
) -> None:
    settings = codex_settings(codex_bin, app_server_transport="unix",
                              app_server_url=f"unix://{tmp_path}/nothing.sock")
    async with AppServer(settings, state_dir=tmp_path / "state", codex_home=codex_home) as app:
        assert app.status["transport"] == "stdio" and app.status["fallbackFrom"] == "unix"
        assert "nothing.sock" in app.status["error"]


def test_a_bearer_is_never_sent_over_plain_ws_to_another_host() -> None:
    with pytest.raises(AppServerUnavailable, match="non-loopback"):
        auth.check_bearer_destination("ws://10.1.2.3:4500", "token")
    auth.check_bearer_destination("ws://127.0.0.1:4500", "token")
    auth.check_bearer_destination("ws://[::1]:4500", "token")
    auth.check_bearer_destination("wss://example.com", "token")
    auth.check_bearer_destination("ws://10.1.2.3:4500", None)


def test_a_minted_jwt_is_hs256_over_the_raw_secret_with_the_configured_claims() -> None:
    import base64
    import hashlib
    import hmac
    import json

    token = auth.mint_hs256_jwt(SECRET, issuer="i", audience="a", lifetime_s=60, now=1000.0)
    header, payload, signature = token.split(".")

    def unb64(part: str) -> bytes:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))

    assert json.loads(unb64(header)) == {"alg": "HS256", "typ": "JWT"}
    assert json.loads(unb64(payload)) == {"iat": 1000, "exp": 1060, "iss": "i", "aud": "a"}
    expected = hmac.new(SECRET, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    assert unb64(signature) == expected
