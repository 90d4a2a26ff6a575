"""Transports: bytes or frames in, JSON-RPC messages out. stdio, ws and unix, one shape.

A transport is an async iterator of incoming messages plus ``send`` and ``close``. It
knows nothing of ids or methods. The three differ only in their pumps:

* ``StdioTransport``: JSON lines on the pipes of a child it owns (see ``process``).
* ``WebSocketTransport`` (websocket.py, imported only when dialing one): one
  JSON-RPC message per text frame, over TCP (``ws://``) or over a unix socket
  (codex's ``--listen unix://`` speaks WebSocket too, not bare JSON lines).

A frame or line that is not a JSON object is yielded as an ``InvalidMessage`` value and
counted by the dispatcher; it never ends the pump. The handshake never sends ``Origin``
(codex answers 403 to any request carrying one).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from boss_agent.appserver.child import ChildProcess
from boss_agent.errors import ConnectionClosed

logger = logging.getLogger(__name__)


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
