"""The daemon on real codex against the real local ControlPlane, for the approval tests.

``DaemonOnCodex`` pairs a device, starts the Daemon with the scripted model's codex
home, and offers the person's side: wait for an approval, decide it on the local API.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx

from boss_agent.appserver.client import AppServer
from boss_agent.controlplane import ControlPlane
from boss_agent.daemon.runtime import Daemon
from boss_agent.demo import scripted_model as sm
from boss_agent.runner import Runner
from boss_agent.sources.gateway import Gateway
from boss_agent.sources.gateway.retry import FAST_POLICY
from tests.support.config import make_config
from tests.support.daemon import WAIT_S, FaultProxy, paired_daemon
from tests.support.gateway import AGENT, read_events, delta_text
from tests.support.gateway import FAST as GATEWAY_TIMING

TURN_WAIT_S = 60  # parent, child and an approval round trip on a loaded 2-core box
FINAL = ("completed", "failed", "cancelled")


class ParentAndChild:
    """Scripts two threads by the ``thread-id`` header codex sends with each model request.

    The parent spawns one agent and waits for it; the child runs ``command`` (which needs
    approval under ``untrusted``) and answers.
    """

    def __init__(self, command: str, *, parent_waits: bool = True) -> None:
        self.command = command
        self.parent_waits = parent_waits  # False: the parent answers (held until release) at once
        self.parent: str | None = None
        self.turns: dict[str, int] = {}
        self.lock = threading.Lock()

    def __call__(self, request: sm.RecordedRequest) -> sm.Response:
        thread = request.headers.get("thread-id", "")
        with self.lock:
            self.parent = self.parent or thread
            step = self.turns[thread] = self.turns.get(thread, 0) + 1
        outputs = request.tool_outputs()
        if thread == self.parent:
            if step == 1:
                return sm.turn(sm.spawn_agent("make the marker file", call_id="call_spawn"))
            if step == 2 and not self.parent_waits:
                return sm.hang(sm.message("the parent did not wait"))
            if step == 2:
                agent = json.loads(outputs["call_spawn"])["agent_id"]
                return sm.turn(sm.wait_agent([agent], call_id="call_wait"))
            return sm.text_reply("the sub-agent made the marker")
        if step == 1:
            return sm.turn(sm.shell_call(self.command, call_id="call_child"))
        return sm.text_reply("marker made")


class DaemonOnCodex:
    def __init__(self, cp: ControlPlane, proxy: FaultProxy, daemon: Daemon) -> None:
        self.cp = cp
        self.proxy = proxy
        self.daemon = daemon

    def task(self, task_id: str) -> dict[str, Any]:
        return self.cp.task(task_id)

    async def until(self, predicate: Callable[[], Any], timeout: float = TURN_WAIT_S) -> None:
        await self.proxy.wait_for(predicate, timeout=timeout)

    async def first_approval(self, task_id: str) -> dict[str, Any]:
        await self.until(lambda: self.task(task_id)["approvals"] or self.task(task_id)["status"] in FINAL)
        approvals = self.task(task_id)["approvals"]
        assert approvals, self.task(task_id)
        first: dict[str, Any] = approvals[0]
        return first

    async def decide(self, task_id: str, approval_id: str, decision: Any) -> httpx.Response:
        async with httpx.AsyncClient(base_url=self.cp.url) as local:
            return await local.post(f"/api/local/approvals/{task_id}/{approval_id}",
                                    json={"decision": decision},
                                    headers={"Authorization": f"Bearer {self.cp.secret}"})

    async def finished(self, task_id: str) -> dict[str, Any]:
        await self.until(lambda: self.task(task_id)["status"] in FINAL)
        return self.task(task_id)


@contextlib.asynccontextmanager
async def gateway_on_codex(tmp_path: Path, codex_bin: str, codex_home: Path, workdir: Path,
                           redis_url: str, max_concurrent: int = 1) -> AsyncIterator[Gateway]:
    """A gateway worker on the real runner and codex, serving ``AGENT`` until the block ends."""
    settings: dict[str, Any] = {"gateway.agent_types": [AGENT], "workspaces": [str(workdir)]}
    config = make_config(tmp_path, codex_bin, **settings)
    async with AppServer.from_config(config, codex_home=codex_home) as app:
        gateway = Gateway(config, Runner(config, app, codex_home=codex_home), worker_id="w-approvals",
                          redis_url=redis_url, max_concurrent=max_concurrent, timing=GATEWAY_TIMING, retry=FAST_POLICY)
        ready = asyncio.Event()
        async with asyncio.TaskGroup() as tg:
            job = tg.create_task(gateway.run(ready))
            await asyncio.wait_for(ready.wait(), WAIT_S)
            try:
                yield gateway
            finally:
                job.cancel()


async def first_form(redis: Any, session: str, message_id: str) -> dict[str, Any]:
    """The task's first ask-user form (3013), as a Boss client parses it."""
    asked = await read_events(redis, session, message_id, timeout=TURN_WAIT_S,
                              until=lambda m: m.data["contentType"] == "3013")
    form: dict[str, Any] = json.loads(delta_text(asked[-1]))
    return form


@contextlib.asynccontextmanager
async def daemon_on_codex(tmp_path: Path, codex_bin: str, codex_home: Path,
                          **config: Any) -> AsyncIterator[DaemonOnCodex]:
    async with ControlPlane(tmp_path / "cp" / "boss.db") as cp, FaultProxy(cp.url) as proxy:
        settings = make_config(tmp_path, server_url=proxy.url, workspace=tmp_path, codex__bin=codex_bin, **config)
        async with paired_daemon(settings, proxy.url, cp.create_pairing_code(), codex_home) as (daemon, _):
            yield DaemonOnCodex(cp, proxy, daemon)
