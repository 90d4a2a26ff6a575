"""The WebSocket transport: one JSON-RPC message per text frame, over TCP or a unix socket.

Apart from transports.py so that the ``websockets`` package is loaded only by a daemon
that dials an app-server (``codex.app_server_transport`` ws or unix); the default stdio
daemon never imports it (~1.8 MB of resident memory, bench row 6). The handshake never
sends ``Origin`` (codex answers 403 to any request carrying one).
"""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, connect, unix_connect
from websockets.exceptions import ConnectionClosed as WsConnectionClosed
from websockets.exceptions import InvalidHandshake, InvalidStatus

from boss_agent.appserver.transports import Incoming, decode, encode
from boss_agent.errors import AppServerUnavailable, AuthRejected, ConnectionClosed
from boss_agent.redact import sanitize_text

# Loopback handshakes finish in ~70 ms; this only bounds a wedged peer.
WS_OPEN_TIMEOUT_S = 10.0
# Same reason as process.STDOUT_LINE_LIMIT: one frame can carry a whole thread history.
WS_MAX_FRAME_BYTES = 64 * 1024 * 1024
# A closing handshake with a healthy peer takes milliseconds; do not wait on a dead one.
WS_CLOSE_TIMEOUT_S = 2.0
UNIX_WS_URI = "ws://localhost/"  # the Host codex's unix listener expects on its handshake


class WebSocketTransport:
    """One JSON-RPC message per text frame (TCP or unix socket underneath)."""

    def __init__(self, ws: ClientConnection, kind: str) -> None:
        self.ws = ws
        self.kind = kind

    async def __aiter__(self) -> AsyncIterator[Incoming]:
        try:
            async for frame in self.ws:
                yield decode(frame)
        except WsConnectionClosed:
            return

    async def send(self, message: dict[str, Any]) -> None:
        try:
            await self.ws.send(encode(message))
        except WsConnectionClosed as exc:
            raise ConnectionClosed("app-server WebSocket closed") from exc

    async def close(self) -> None:
        await self.ws.close()


# codex's 401 bodies, word for word. They are kept verbatim: the sanitizer would mask the
# words after "bearer" and hide the very cause the user needs to see.
CODEX_AUTH_REASONS = frozenset({
    "missing websocket bearer token", "invalid websocket bearer token",
    "invalid authorization header", "invalid websocket jwt", "expired websocket jwt",
    "websocket jwt issuer mismatch", "websocket jwt audience mismatch",
    "websocket jwt is not valid yet",
})


def _reason(body: bytes | bytearray) -> str:
    text = body.decode("utf-8", "replace").strip()
    return text if text in CODEX_AUTH_REASONS else sanitize_text(text, limit=200)


def _handshake_error(exc: Exception, where: str) -> Exception:
    """Map a failed handshake to AuthRejected (401/403, with codex's body) or unavailable."""
    if isinstance(exc, InvalidStatus):
        status = exc.response.status_code
        body = _reason(exc.response.body)
        if status in (401, 403):
            return AuthRejected(status, body)
        return AppServerUnavailable(f"{where} answered HTTP {status} {body}".strip())
    if isinstance(exc, OSError):
        return AppServerUnavailable(f"{where} unreachable: {exc.strerror or exc.__class__.__name__}")
    return AppServerUnavailable(f"{where} handshake failed: {exc.__class__.__name__}")


_WS_OPTIONS: dict[str, Any] = {
    "open_timeout": WS_OPEN_TIMEOUT_S,
    "close_timeout": WS_CLOSE_TIMEOUT_S,
    "max_size": WS_MAX_FRAME_BYTES,
    "compression": None,  # loopback: deflate only costs CPU
    "origin": None,
}


async def open_websocket(url: str, headers: dict[str, str]) -> WebSocketTransport:
    """Connect to ``ws://host:port`` (or ``wss://``); no Origin header is sent."""
    try:
        ws = await connect(url, additional_headers=headers, **_WS_OPTIONS)
    except (InvalidHandshake, OSError, TimeoutError) as exc:
        raise _handshake_error(exc, "app-server WebSocket") from exc
    return WebSocketTransport(ws, "ws")


def check_socket_owner(path: Path) -> None:
    """The socket must exist, be a socket, and belong to us (no one else's listener)."""
    try:
        info = path.stat()
    except OSError as exc:
        raise AppServerUnavailable(f"app-server socket {path.name}: {exc.strerror}") from exc
    if not stat.S_ISSOCK(info.st_mode):
        raise AppServerUnavailable(f"app-server socket {path.name} is not a socket")
    if info.st_uid != os.getuid():
        raise AppServerUnavailable(f"app-server socket {path.name} belongs to another user")


async def open_unix(path: Path, headers: dict[str, str]) -> WebSocketTransport:
    """WebSocket over codex's unix socket (``--listen unix://PATH``)."""
    check_socket_owner(path)
    try:
        ws = await unix_connect(str(path), uri=UNIX_WS_URI, additional_headers=headers,
                                **_WS_OPTIONS)
    except (InvalidHandshake, OSError, TimeoutError) as exc:
        raise _handshake_error(exc, "app-server unix socket") from exc
    return WebSocketTransport(ws, "unix")
