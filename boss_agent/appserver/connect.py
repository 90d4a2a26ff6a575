"""Opening one connection to codex app-server for the configured transport, and running it.

``Connector.open`` builds a transport: a stdio child; a WebSocket or unix-socket
connection to ``codex.app_server_url``; or, with ws/unix and no URL, a listener child
it starts itself (``codex app-server --listen …`` with a fresh capability token file,
mode 0600). When ws/unix is unreachable or refuses our credentials it falls back to
stdio and records why (``fallback_from``/``fallback_error``).

``Connection.run`` owns everything that lives as long as the connection: the receive
loop, the stderr drains, the health probe and the listener child's exit watch. It
returns when the connection ends, for whatever reason.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import secrets
import socket
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from boss_agent.appserver import auth
from boss_agent.appserver.child import ChildProcess, spawn_app_server
from boss_agent.appserver.rpc import Dispatcher, RequestId
from boss_agent.appserver.transports import StdioTransport, Transport
from boss_agent.config import CodexSettings
from boss_agent.errors import (
    AppServerError,
    AppServerUnavailable,
    AuthRejected,
    RpcError,
)
from boss_agent.redact import sanitize_text

logger = logging.getLogger(__name__)

# A listener answers /readyz ~0.2-0.4 s after spawn on an idle machine; a loaded 2-core box
# with the npm wrapper can take several times that.
LISTENER_START_TIMEOUT_S = 30.0
# What codex prints on stderr once its WebSocket listener is bound (real codex 0.171.0).
LISTENING_ON = re.compile(r"listening on: (ws://127\.0\.0\.1:\d+)")
READY_POLL_S = 0.05  # the listener gives no readiness signal we could await instead
HEALTH_INTERVAL_S = 30.0  # a dead child is seen at once via EOF; this catches a wedged one
HEALTH_TIMEOUT_S = 10.0  # a cheap request answers in milliseconds even mid-turn
HEALTH_FAILURES_TO_RESTART = 2  # an overloaded codex may drop a single reply (-32001)
HEALTH_METHOD = "thread/loaded/list"  # cheap: a list of ids, no disk access
LISTENER_DIR = "app-server"


@dataclass
class Connection:
    transport: Transport
    dispatcher: Dispatcher
    child: ChildProcess | None = None  # the stdio child or the listener we started
    readyz_url: str | None = None  # health endpoint of a ws listener we started
    fallback_from: str | None = None
    fallback_error: str | None = None

    @property
    def kind(self) -> str:
        return self.transport.kind

    async def run(self, startup: Callable[[], Awaitable[None]]) -> None:
        """Run until the connection ends; ``startup`` (the handshake) runs once the loop is live."""
        async with asyncio.TaskGroup() as tg:
            loop = tg.create_task(self.dispatcher.run())
            side = [tg.create_task(job) for job in self._side_jobs()]
            try:
                await startup()
                # Probing starts after the handshake: before it codex may not answer at all.
                side.append(tg.create_task(self._probe_health()))
                await loop
            finally:
                for task in side:
                    task.cancel()
                if not loop.done():
                    await self.close()

    def _side_jobs(self) -> list[Coroutine[Any, Any, None]]:
        jobs: list[Coroutine[Any, Any, None]] = []
        if self.child is not None:
            jobs.append(self.child.drain_stderr())
            if self.transport.kind != "stdio":
                jobs.append(self._close_when_child_exits(self.child))
        return jobs

    async def _close_when_child_exits(self, child: ChildProcess) -> None:
        code = await child.proc.wait()
        logger.warning("codex app-server listener exited (code %s)", code)
        await self.transport.close()

    async def _probe_health(self) -> None:
        failures = 0
        while failures < HEALTH_FAILURES_TO_RESTART:
            await asyncio.sleep(HEALTH_INTERVAL_S)
            failures = 0 if await self._healthy() else failures + 1
        logger.warning("codex app-server stopped answering health probes; restarting it")
        await self.close()

    async def _healthy(self) -> bool:
        try:
            if self.readyz_url is not None:
                async with httpx.AsyncClient(timeout=HEALTH_TIMEOUT_S) as http:
                    return (await http.get(self.readyz_url)).status_code == 200
            await self.dispatcher.request(HEALTH_METHOD, {}, HEALTH_TIMEOUT_S)
            return True
        except RpcError:
            return True  # it answered: alive
        except (AppServerError, httpx.HTTPError):
            return False

    async def close(self) -> None:
        """Bounded: closes the transport and stops (kills the group of) any child we own.

        Idempotent and safe to call again: a close begun by the health probe can be
        cancelled half-way when the receive loop ends, so the supervisor always closes
        once more to finish the job.
        """
        try:
            await self.transport.close()
        finally:
            if self.child is not None:
                await self.child.stop()


class Connector:
    """Builds connections for one configuration; every call starts from scratch."""

    def __init__(self, codex: CodexSettings, *, state_dir: Path, codex_home: Path | None = None,
                 ids: Callable[[], Iterator[RequestId]] | None = None) -> None:
        self.codex = codex
        self.state_dir = state_dir
        self.codex_home = codex_home
        self._ids = ids

    def _dispatcher(self, transport: Transport) -> Dispatcher:
        return Dispatcher(transport, ids=self._ids() if self._ids else None)

    async def open(self) -> Connection:
        kind = self.codex.app_server_transport
        if kind == "stdio":
            return await self.open_stdio()
        try:
            return await self._open_remote(kind)
        except (AuthRejected, AppServerUnavailable) as exc:
            # AuthRejected carries only codex's fixed reason (websocket.CODEX_AUTH_REASONS).
            reason = str(exc) if isinstance(exc, AuthRejected) else sanitize_text(str(exc), limit=200)
            logger.warning("codex app-server over %s unavailable (%s); falling back to stdio",
                           kind, reason)
            conn = await self.open_stdio()
            conn.fallback_from, conn.fallback_error = kind, reason
            return conn

    async def open_stdio(self) -> Connection:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        child = await spawn_app_server(self.codex.bin, codex_home=self.codex_home, cwd=self.state_dir)
        transport = StdioTransport(child)
        return Connection(transport, self._dispatcher(transport), child=child)

    async def _open_remote(self, kind: str) -> Connection:
        url = self.codex.app_server_url
        if url is not None:
            transport = await dial(url, auth.bearer_token(self.codex))
            return Connection(transport, self._dispatcher(transport))
        child, url, token, readyz = await self._start_listener(kind)
        try:
            transport = await dial(url, token)
        except BaseException:
            await child.stop()
            raise
        return Connection(transport, self._dispatcher(transport), child=child, readyz_url=readyz)

    async def _start_listener(self, kind: str) -> tuple[ChildProcess, str, str, str | None]:
        """Start our own long-running listener with a fresh capability token."""
        run_dir = self.state_dir / LISTENER_DIR
        run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        token = secrets.token_urlsafe(32)
        token_file = run_dir / "listener.token"
        write_private(token_file, token)
        if kind == "ws":
            # Port 0: codex binds a free port itself and prints it. Choosing one here and
            # releasing it would let another local process take it in between, answer
            # /readyz and receive our token and every prompt.
            url, readyz = "ws://127.0.0.1:0", None
        else:
            socket_path = run_dir / "codex.sock"
            socket_path.unlink(missing_ok=True)
            url, readyz = f"unix://{socket_path}", None
        args = ["--listen", url, "--ws-auth", "capability-token", "--ws-token-file", str(token_file)]
        child = await spawn_app_server(self.codex.bin, codex_home=self.codex_home, cwd=self.state_dir,
                                       extra_args=args, label="codex app-server listener",
                                       pipe_stdout=False)
        try:
            if kind == "ws":
                async with asyncio.timeout(LISTENER_START_TIMEOUT_S):
                    url = (await child.stderr_match(LISTENING_ON))[1]
                readyz = "http" + url[len("ws"):] + "/readyz"
            await wait_listening(child, readyz, None if readyz else Path(url[len("unix://"):]))
        except TimeoutError:
            await child.stop()
            raise AppServerUnavailable("codex app-server listener did not say where it listens") from None
        except BaseException:
            await child.stop()
            raise
        return child, url, token, readyz


async def dial(url: str, bearer: str | None) -> Transport:
    """Connect to ``ws://``/``wss://`` or ``unix:///path`` with an optional bearer."""
    from boss_agent.appserver.websocket import open_unix, open_websocket  # only a dialing daemon loads websockets

    headers = auth.authorization_headers(bearer)
    if url.startswith("unix://"):
        return await open_unix(Path(urlsplit(url).path), headers)
    auth.check_bearer_destination(url, bearer)
    return await open_websocket(url, headers)


async def wait_listening(child: ChildProcess, readyz: str | None, socket_path: Path | None) -> None:
    """Poll until the listener is up; fail early if the child exits."""
    try:
        async with asyncio.timeout(LISTENER_START_TIMEOUT_S):
            await _poll_listening(child, readyz, socket_path)
    except TimeoutError:
        raise AppServerUnavailable("codex app-server listener did not become ready") from None


async def _poll_listening(child: ChildProcess, readyz: str | None, socket_path: Path | None) -> None:
    async with httpx.AsyncClient(timeout=READY_POLL_S * 20) as http:
        while True:
            if not child.running:
                raise AppServerUnavailable(f"codex app-server listener exited (code {child.proc.returncode})")
            if socket_path is not None and socket_path.exists():  # noqa: ASYNC240 - one stat, no I/O wait
                return
            if readyz is not None:
                try:
                    if (await http.get(readyz)).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass  # not listening yet
            await asyncio.sleep(READY_POLL_S)


def free_loopback_port() -> int:
    # For tests that start a listener themselves. Bind-then-release races with another
    # process taking the port, which is why our own listener binds port 0 instead.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to a fresh file only we can read (mode 0600 from creation on)."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
