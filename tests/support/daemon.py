"""Test peers for the Boss source and the daemon (used by tests/test_boss_* and test_daemon_*).

``FaultProxy`` is a real HTTP reverse proxy on loopback (aiohttp in, httpx out) that
records every request and can answer a status of its choice for the first N requests
matching a path suffix; it sits in front of the real ControlPlane. ``StubRunner`` is
a small in-test ``TaskRunner`` for the source's own logic (claim, spool, progress,
approvals, cancel) where the real codex runner would only add noise; ``running`` serves
a daemon on one. ``paired_daemon`` pairs a real ``Daemon`` (real codex, the scripted
model's CODEX_HOME) with a control plane and runs it until the block ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self

import httpx
from aiohttp import web

from boss_agent.config import Config
from boss_agent.controlplane import ControlPlane
from boss_agent.daemon.runtime import Daemon
from boss_agent.progress.card import new_card
from boss_agent.sources.boss.pairing import pair_device
from boss_agent.sources.boss.retry import BossApiRetry
from boss_agent.tasks import ApprovalRequest, Task, TaskResult, TaskSink
from tests.support.waits import eventually

WAIT_S = 30.0  # upper bound for any awaited condition in these tests
DAEMON_READY_S = 60.0  # pairing, codex start-up and the first claim
PROXY_SHUTDOWN_S = 1.0  # in-flight proxied long polls are abandoned at teardown
CLAIM_WAIT_MS = 300  # short long polls keep the tests' shutdown quick
FAST = BossApiRetry.fast()


@dataclass
class Fault:
    suffix: str
    remaining: int
    status: int = 500
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Seen:
    method: str
    path: str
    body: Any
    status: int


class FaultProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.faults: list[Fault] = []
        self.claim_injections: list[list[Any]] = []  # answered instead of the next claims
        self.heartbeat_interval_ms: int | None = None  # rewrites the server's interval
        self.seen: list[Seen] = []
        self.changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._client: httpx.AsyncClient | None = None
        self.url = ""

    def fail(self, suffix: str, count: int, status: int = 500, **headers: str) -> None:
        self.faults.append(Fault(suffix, count, status, headers))

    def inject_claim(self, tasks: list[Any]) -> None:
        self.claim_injections.append(tasks)

    def requests(self, suffix: str, method: str = "POST") -> list[Seen]:
        return [s for s in self.seen if s.path.endswith(suffix) and s.method == method]

    async def wait_for(self, predicate: Any, timeout: float = WAIT_S) -> None:
        await eventually(predicate, timeout, changed=self.changed)

    async def __aenter__(self) -> Self:
        self._client = httpx.AsyncClient(timeout=None)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=PROXY_SHUTDOWN_S)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner and self._client
        # Upstream long polls of a daemon that is gone would hold the cleanup for ~25 s.
        await self._client.aclose()
        await self._runner.cleanup()

    def _record(self, request: web.Request, raw: bytes, status: int) -> None:
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        self.seen.append(Seen(request.method, request.path, body, status))
        self.changed.set()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        assert self._client
        try:
            raw = await request.read()
        except ConnectionResetError:  # the daemon cancelled a long poll mid-request
            return web.Response(status=499)
        for fault in self.faults:
            if fault.remaining > 0 and request.path.endswith(fault.suffix):
                fault.remaining -= 1
                self._record(request, raw, fault.status)
                body = {"error": {"code": "injected", "message": "injected fault"}}
                return web.json_response(body, status=fault.status, headers=fault.headers)
        if request.path.endswith("/tasks/claim") and self.claim_injections:
            self._record(request, raw, 200)
            return web.json_response({"tasks": self.claim_injections.pop(0)})
        headers = {k: v for k, v in request.headers.items()
                   if k.lower() not in ("host", "content-length", "transfer-encoding")}
        try:
            upstream = await self._client.request(request.method, self.upstream + request.path_qs,
                                                  content=raw, headers=headers)
        except (httpx.HTTPError, RuntimeError):  # torn down mid-request
            return web.Response(status=502)
        self._record(request, raw, upstream.status_code)
        content = upstream.content
        if request.path.endswith("/heartbeat") and self.heartbeat_interval_ms and upstream.is_success:
            content = json.dumps({**upstream.json(),
                                  "heartbeatIntervalMs": self.heartbeat_interval_ms}).encode()
        return web.Response(body=content, status=upstream.status_code,
                            content_type="application/json")


@contextlib.asynccontextmanager
async def serving(daemon: Daemon) -> AsyncIterator[asyncio.Task[None]]:
    """``daemon.run`` for the block: ready first (a start-up error is raised), then a
    graceful stop unless the block asked for one itself (a second ask would force it);
    yields the run's task."""
    ready = asyncio.Event()
    async with asyncio.TaskGroup() as tg:
        job = tg.create_task(daemon.run(ready))
        await asyncio.wait_for(ready.wait(), DAEMON_READY_S)
        try:
            yield job
        finally:
            if not job.done():
                if not daemon.shutdown.stopping.is_set():
                    daemon.request_stop()
                await asyncio.wait_for(job, WAIT_S)


@contextlib.asynccontextmanager
async def running(config: Any, runner: Any, **kwargs: Any) -> AsyncIterator[Daemon]:
    """A daemon with ``runner`` (a ``StubRunner``) in place of codex, serving for the block."""
    daemon = Daemon(config, runner=runner, retry_policy=FAST, claim_wait_ms=CLAIM_WAIT_MS,
                    handle_signals=False, **kwargs)
    async with serving(daemon):
        yield daemon


async def spool_empty(daemon: Daemon) -> None:
    """Until every completion the daemon spooled has reached the server."""
    source = daemon.source
    assert source is not None
    await eventually(lambda: len(source.spool) == 0, changed=source.flusher.changed)


async def finished(cp: ControlPlane, proxy: FaultProxy, task_id: str) -> dict[str, Any]:
    """The task's view on ``cp`` once it is completed, failed or cancelled."""
    await proxy.wait_for(lambda: cp.task(task_id)["status"] in ("completed", "failed", "cancelled"))
    return cp.task(task_id)


@contextlib.asynccontextmanager
async def paired_daemon(config: Config, server_url: str, pairing_code: str,
                        codex_home: Path) -> AsyncIterator[tuple[Daemon, asyncio.Task[None]]]:
    """A daemon paired with ``server_url`` and claiming; yields it and its run; stops it after."""
    policy = BossApiRetry.fast()
    await pair_device(config.state_dir, server_url, pairing_code, policy=policy)
    daemon = Daemon(config, codex_home=codex_home, env={"CODEX_HOME": str(codex_home)},
                    retry_policy=policy, claim_wait_ms=300, handle_signals=False)
    async with serving(daemon) as job:
        yield daemon, job


class StubRunner:
    """Streams ``cards`` progress updates, optionally asks one approval, then waits.

    It finishes when ``release`` is set (completed, ``resultText`` = "done: <prompt>")
    or when the task's cancel event is set (cancelled), like the real runner does.
    """

    capabilities: ClassVar[dict[str, Any]] = {"codexExec": {"available": True, "version": "test"}}

    def __init__(self, cards: int = 3, approval: bool = False, hold: bool = False,
                 thread: str | None = None) -> None:
        self.cards = cards
        self.approval = approval
        self.hold = hold
        self.thread = thread  # when set: the turn's ids reach the sink, as the runner's do
        self.release = asyncio.Event()
        self.started: dict[str, asyncio.Event] = {}
        self.decisions: dict[str, Any] = {}
        self.runs: list[str] = []

    def started_event(self, task_id: str) -> asyncio.Event:
        return self.started.setdefault(task_id, asyncio.Event())

    async def run(self, task: Task, sink: TaskSink, cancel: asyncio.Event) -> TaskResult:
        self.runs.append(task.task_id)
        self.started_event(task.task_id).set()
        running = new_card().evolve(status="running")
        for index in range(self.cards):
            await sink.progress(running.evolve(final_text=f"part {index}"))
        if self.thread is not None:
            await sink.turn_started(self.thread, f"turn_{len(self.runs)}")
        if self.approval:
            request = ApprovalRequest(f"apr_{task.task_id}_1", "command", "Run a command", "low",
                                      ("accept", "decline"))
            self.decisions[task.task_id] = await sink.request_approval(request)
        if self.hold:
            async with asyncio.TaskGroup() as tg:
                done = [tg.create_task(self.release.wait()), tg.create_task(cancel.wait())]
                await asyncio.wait(done, return_when=asyncio.FIRST_COMPLETED)
                for job in done:
                    job.cancel()
        last = running.evolve(status="cancelled" if cancel.is_set() else "completed")
        await sink.progress(last)
        final = last.to_dict()
        if cancel.is_set():
            return TaskResult(status="cancelled", backend="app_server", error_code="cancelled",
                              error_message="cancelled", execution_progress=final)
        turn = f"turn_{len(self.runs)}" if self.thread is not None else "turn_stub"
        return TaskResult(status="completed", backend="app_server", codex_thread_ref=self.thread or "thr_stub",
                          turn_id=turn, result_text=f"done: {task.prompt}",
                          execution_progress=final)
