"""The real codex app-server as tests start it: its settings, one turn on it, and a
``codex app-server --listen ws://…`` process of the test's own (``Listener``)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
from pathlib import Path
from typing import Any

from boss_agent.appserver.client import AppServer
from boss_agent.appserver.connect import free_loopback_port
from boss_agent.codexbin import child_environment, resolve_native
from boss_agent.config import CodexSettings, load_config

LISTENER_READY_TIMEOUT_S = 30
TURN_TIMEOUT_S = 30


def codex_settings(codex_bin: str, **overrides: Any) -> CodexSettings:
    """The default settings with the test's codex binary and ``overrides``."""
    base = load_config(overrides={"codex.bin": codex_bin}, environ={}).codex
    return dataclasses.replace(base, **overrides)


async def run_turn(app: AppServer, workdir: Path, text: str = "say hello") -> dict[str, Any]:
    """Start a thread and a turn; return turn/completed's params, with the streamed text."""
    client = await app.client()
    thread = (await client.thread_start(cwd=str(workdir)))["thread"]
    deltas: list[str] = []
    async with client.listen(thread["id"]) as listener:
        started = await client.turn_start(thread["id"], [{"type": "text", "text": text}])
        async with asyncio.timeout(TURN_TIMEOUT_S):
            async for note in listener:
                if note.method == "item/agentMessage/delta":
                    deltas.append(note.params["delta"])
                if note.method == "turn/completed":
                    assert note.params["turn"]["id"] == started["turn"]["id"]
                    return {**note.params, "text": "".join(deltas)}
    raise AssertionError("listener ended before turn/completed")


class Listener:
    """A real `codex app-server --listen ws://…` with the given auth flags."""

    def __init__(self, codex_bin: str, home: Path, args: list[str]) -> None:
        binary = resolve_native(codex_bin)
        self.port = free_loopback_port()
        self.url = f"ws://127.0.0.1:{self.port}"
        env = child_environment({**binary.env, "CODEX_HOME": str(home)})
        self.proc = subprocess.Popen(
            [*binary.argv, "app-server", "--listen", self.url, *args],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=env, start_new_session=True,
        )

    async def ready(self) -> None:
        import httpx

        async with asyncio.timeout(LISTENER_READY_TIMEOUT_S), httpx.AsyncClient() as http:
            while True:
                assert self.proc.poll() is None, "listener exited"
                try:
                    if (await http.get(f"http://127.0.0.1:{self.port}/readyz")).status_code == 200:
                        return
                except httpx.HTTPError:
                    await asyncio.sleep(0.05)  # codex has no readiness signal to await

    def stop(self) -> None:
        os.killpg(self.proc.pid, 9)
        self.proc.wait(timeout=10)
