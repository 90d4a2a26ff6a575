"""Transports: bytes or frames in, JSON-RPC messages out. stdio, ws and unix, one shape.

A transport is an async iterator of incoming messages plus ``send`` and ``close``. It
knows nothing of ids or methods. The three differ only in their pumps:

* ``StdioTransport``: JSON lines on the pipes of a child it owns (see ``process``).
* ``WebSocketTransport``: one JSON-RPC message per text frame, over TCP (``ws://``)
  or over a unix socket (codex's ``--listen unix://`` is WebSocket too, facts §3h).

A frame or line that is not a JSON object is yielded as an ``InvalidMessage`` value and
counted by the dispatcher; it never ends the pump. The handshake never sends ``Origin``
(codex answers 403 to any request carrying one).
"""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from websockets.asyncio.client import ClientConnection, connect, unix_connect
from websockets.exceptions import ConnectionClosed as WsConnectionClosed
from websockets.exceptions import InvalidHandshake, InvalidStatus

from boss_agent.appserver.child import ChildProcess
from boss_agent.errors import AppServerUnavailable, AuthRejected, ConnectionClosed
from boss_agent.redact import sanitize_text

logger = logging.getLogger(__name__)

# Loopback handshakes finish in ~70 ms (facts §3h); this only bounds a wedged peer.
WS_OPEN_TIMEOUT_S = 10.0
# Same reason as process.STDOUT_LINE_LIMIT: one frame can carry a whole thread history.
WS_MAX_FRAME_BYTES = 64 * 1024 * 1024
# A closing handshake with a healthy peer takes milliseconds; do not wait on a dead one.
WS_CLOSE_TIMEOUT_S = 2.0
UNIX_WS_URI = "ws://localhost/"  # the Host codex's unix listener expects on its handshake


@dataclass(frozen=True)
class InvalidMessage:
    """A line or frame that was not a JSON object. ``reason`` never quotes the content."""

    reason: str


Incoming = dict[str, Any] | InvalidMessage


class Transport(Protocol):
    kind: str  # "stdio" | "ws" | "unix"

    def __aiter__(self) -> AsyncIterator[Incoming]: ...

    async def send(self, message: dict[str, Any]) -> None: ...

    async def close(self) -> None: ...


def decode(data: str | bytes) -> Incoming:
    """The one parser every transport uses."""
    try:
        message = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return InvalidMessage("not JSON")
    if not isinstance(message, dict):
        return InvalidMessage("not a JSON object")
    return message


def encode(message: dict[str, Any]) -> str:
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False)


class StdioTransport:
    """JSON lines over the stdin/stdout of a `codex app-server` child."""

    kind = "stdio"

    def __init__(self, child: ChildProcess) -> None:
        self.child = child

    async def __aiter__(self) -> AsyncIterator[Incoming]:
        stdout = self.child.proc.stdout
        assert stdout is not None, "stdio transport needs a piped stdout"
        while True:
            try:
                line = await stdout.readline()
            except ValueError:  # longer than STDOUT_LINE_LIMIT; asyncio skipped it
                yield InvalidMessage("line too long")
                continue
            if not line:
                return  # EOF: the child exited or closed stdout
            if line.strip():
                yield decode(line)

    async def send(self, message: dict[str, Any]) -> None:
        stdin = self.child.proc.stdin
        if stdin is None or stdin.is_closing():
            raise ConnectionClosed("codex app-server stdin is closed")
        try:
            stdin.write(encode(message).encode("utf-8") + b"\n")
            await stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise ConnectionClosed("codex app-server exited") from exc

    async def close(self) -> None:
        await self.child.stop()


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


# codex's 401 bodies (facts §3h). They are kept verbatim: the sanitizer would mask the
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
