"""The JSON-RPC dispatcher: ids, pending requests, the receive loop, server requests.

It sits on a transport and knows nothing of app-server methods. The correlation
contract (style.md):

* ids come from an injectable iterator; a pending request is removed in ``finally``
  on every path (answer, timeout, cancellation, closed connection);
* a late or unknown response is logged at debug and dropped;
* when the receive loop ends (EOF, child killed, socket closed) every pending request
  fails at once with ``ConnectionClosed``, and so does every listener;
* an invalid line/frame is counted, never fatal;
* a server request nobody takes gets its default answer at once; an error raised
  while answering becomes a wire error in exactly one place, ``_answer_server_request``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
from collections.abc import Iterator
from typing import Any

from boss_agent.appserver import contract
from boss_agent.appserver.routing import Notification, Router, ServerRequest
from boss_agent.appserver.transports import InvalidMessage, Transport
from boss_agent.errors import (
    INTERNAL_ERROR,
    ConnectionClosed,
    RequestTimeout,
    rpc_error_from_wire,
)

logger = logging.getLogger(__name__)

RequestId = int | str


class Dispatcher(contract.Dispatcher):
    """Correlates requests and responses on one transport; runs its receive loop."""

    def __init__(self, transport: Transport, *, ids: Iterator[RequestId] | None = None) -> None:
        self.transport = transport
        self.nonce = secrets.token_hex(8)  # names this connection in approval ids
        self.router = Router()
        self.invalid_messages = 0
        self.closed = asyncio.Event()
        self._ids = ids if ids is not None else itertools.count(1)
        self._pending: dict[RequestId, asyncio.Future[Any]] = {}
        self._close_error: ConnectionClosed | None = None
        self._send_lock = asyncio.Lock()  # one writer at a time: lines/frames never interleave

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    # ------------------------------------------------------------------ outgoing

    async def request(self, method: str, params: dict[str, Any] | None, timeout: float) -> Any:
        """Send one request and await its result; raises RpcError, RequestTimeout, ConnectionClosed."""
        self._check_open()
        request_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        message: dict[str, Any] = {"id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        try:
            # The send is inside the deadline: a child that stopped reading blocks drain().
            async with asyncio.timeout(timeout):
                await self._send(message)
                return await future
        except TimeoutError:
            raise RequestTimeout(f"{method}: no response within {timeout:g} s") from None
        finally:
            self._pending.pop(request_id, None)
            # The connection may have failed this future while we were still sending;
            # mark its exception retrieved so asyncio does not report it at GC time.
            if future.done() and not future.cancelled():
                future.exception()

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"method": method}
        if params is not None:
            message["params"] = params
        await self._send(message)

    async def answer(self, request_id: RequestId, result: dict[str, Any] | None,
                     error: dict[str, Any] | None) -> None:
        """Reply to a server request (result or error)."""
        message: dict[str, Any] = {"id": request_id}
        if error is not None:
            message["error"] = error
        else:
            message["result"] = result if result is not None else {}
        await self._send(message)

    async def _send(self, message: dict[str, Any]) -> None:
        self._check_open()
        async with self._send_lock:
            await self.transport.send(message)

    def _check_open(self) -> None:
        if self._close_error is not None:
            raise ConnectionClosed(str(self._close_error))

    # ------------------------------------------------------------------ incoming

    async def run(self) -> None:
        """The receive loop; returns when the transport ends. Fails everything pending."""
        reason = "app-server connection closed"
        try:
            async for message in self.transport:
                await self._dispatch(message)
        except ConnectionClosed as exc:
            reason = str(exc) or reason
        finally:
            self._close(ConnectionClosed(reason))

    async def _dispatch(self, message: dict[str, Any] | InvalidMessage) -> None:
        if isinstance(message, InvalidMessage):
            self.invalid_messages += 1
            logger.warning("ignored an invalid app-server message (%s)", message.reason)
            return
        method = message.get("method")
        if isinstance(method, str):
            params = message.get("params")
            params = params if isinstance(params, dict) else {}
            if "id" in message:
                await self._server_request(ServerRequest(message["id"], method, params, self.answer,
                                                         connection=self.nonce))
            else:
                self.router.notification(Notification(method, params, message))
        elif "id" in message:
            self._response(message)
        else:
            self.invalid_messages += 1
            logger.warning("ignored an app-server message with neither method nor id")

    def _response(self, message: dict[str, Any]) -> None:
        future = self._pending.get(message["id"])
        if future is None or future.done():
            # Timed out, cancelled, or never ours (facts: codex ignores such ids too).
            logger.debug("dropped a late or unknown app-server response")
            return
        error = message.get("error")
        if isinstance(error, dict):
            future.set_exception(rpc_error_from_wire(error))
        else:
            future.set_result(message.get("result"))

    async def _server_request(self, request: ServerRequest) -> None:
        if self.router.take(request):
            return
        logger.info("answered an unrouted app-server request %s with its default", request.method)
        await self._answer_server_request(request)

    async def _answer_server_request(self, request: ServerRequest) -> None:
        """The one place a failure while answering becomes a wire error."""
        try:
            await request.answer_default()
        except ConnectionClosed:
            raise
        except Exception as exc:
            logger.exception("answering app-server request %s failed", request.method)
            await self.answer(request.id, None, {"code": INTERNAL_ERROR, "message": type(exc).__name__})

    async def answer_unrouted(self, requests: list[ServerRequest]) -> None:
        """Default-answer requests a listener left behind when it unregistered."""
        for request in requests:
            if not request.answered:
                await self._answer_server_request(request)

    def _close(self, error: ConnectionClosed) -> None:
        if self._close_error is not None:
            return
        self._close_error = error
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ConnectionClosed(str(error)))
        self.router.close(error)
        self.closed.set()
