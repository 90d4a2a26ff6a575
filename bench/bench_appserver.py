"""Benchmark: boss-agent's app-server client against a minimal direct client.

Both drive the same codex binary (native, as codexbin resolves it) against the same
instant scripted model provider, in one run:

* warm request round trip: ``config/read`` on an initialized connection;
* warm turn: ``turn/start`` until ``turn/completed`` on an existing thread.

The direct client is the smallest thing that works: an asyncio subprocess, JSON lines,
one reader loop and a dict of futures. The ratio is the cost of our layers (dispatcher,
semaphore, tenacity, listeners). Run: ``python -m bench.bench_appserver`` (~20 s).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.bench_daemon import codex_bin
from boss_agent.demo import scripted_model as sm
from boss_agent.appserver.client import AppServer
from boss_agent.appserver.methods import OPT_OUT_NOTIFICATIONS
from boss_agent.codexbin import child_environment, resolve_native
from boss_agent.config import load_config

REQUESTS = 200
TURNS = 20
WARMUP = 3
TURN_TIMEOUT_S = 30


class DirectClient:
    """Raw asyncio subprocess JSON lines: no retries, no routing, no supervision."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.next_id = 0
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.turn_done: asyncio.Future[None] | None = None

    @classmethod
    async def start(cls, codex: str, home: Path, cwd: Path) -> DirectClient:
        binary = resolve_native(codex)
        proc = await asyncio.create_subprocess_exec(
            *binary.argv, "app-server", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, cwd=cwd, limit=2**24,
            env=child_environment({**binary.env, "CODEX_HOME": str(home)}), start_new_session=True)
        return cls(proc)

    async def read(self) -> None:
        assert self.proc.stdout
        async for line in self.proc.stdout:
            message = json.loads(line)
            if "method" not in message and message.get("id") in self.pending:
                self.pending.pop(message["id"]).set_result(message.get("result"))
            elif message.get("method") == "turn/completed" and self.turn_done:
                self.turn_done.set_result(None)

    async def handshake(self) -> None:
        """``initialize`` (opting out of what boss-agent opts out of) and ``initialized``."""
        await self.request("initialize", {
            "clientInfo": {"name": "bench-direct", "version": "0"},
            "capabilities": {"experimentalApi": True,
                             "optOutNotificationMethods": list(OPT_OUT_NOTIFICATIONS)}})
        assert self.proc.stdin
        self.proc.stdin.write(b'{"method":"initialized"}\n')

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        assert self.proc.stdin
        self.next_id += 1
        future = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = future
        self.proc.stdin.write(json.dumps({"id": self.next_id, "method": method, "params": params}).encode() + b"\n")
        await self.proc.stdin.drain()
        return await future

    async def turn(self, thread_id: str) -> None:
        self.turn_done = asyncio.get_running_loop().create_future()
        await self.request("turn/start", {"threadId": thread_id, "input": [{"type": "text", "text": "hi"}]})
        await asyncio.wait_for(self.turn_done, TURN_TIMEOUT_S)


class BossDriver:
    """The same two operations through boss-agent's AppServer."""

    def __init__(self, app: AppServer) -> None:
        self.app = app
        self.thread = ""

    async def setup(self, cwd: Path) -> None:
        client = await self.app.client()
        self.thread = (await client.thread_start(cwd=str(cwd)))["thread"]["id"]

    async def request(self) -> None:
        await (await self.app.client()).call("config/read", {})

    async def turn(self) -> None:
        client = await self.app.client()
        async with client.listen(self.thread) as listener:
            await client.turn_start(self.thread, [{"type": "text", "text": "hi"}])
            async with asyncio.timeout(TURN_TIMEOUT_S):
                async for note in listener:
                    if note.method == "turn/completed":
                        return


class DirectDriver:
    def __init__(self, client: DirectClient) -> None:
        self.client = client
        self.thread = ""

    async def setup(self, cwd: Path) -> None:
        await self.client.handshake()
        self.thread = (await self.client.request("thread/start", {"cwd": str(cwd)}))["thread"]["id"]

    async def request(self) -> None:
        await self.client.request("config/read", {})

    async def turn(self) -> None:
        await self.client.turn(self.thread)


async def measure(drivers: dict[str, Any], op: str, count: int, warmup: int = WARMUP,
                  pair: tuple[str, str] | None = None) -> dict[str, list[float]]:
    """Alternate the drivers sample by sample, so drift and order affect both alike.

    Every other sample runs them in reverse order: whatever the previous call leaves
    behind (a codex flush, a GC) falls on each driver as often as on the others. With
    ``pair``, the other drivers run first in a fixed order and the two named ones last,
    back to back, their order alternating: neither of them ever follows the others'
    work more often than its partner does (``pair_ratio``).
    """
    samples: dict[str, list[float]] = {name: [] for name in drivers}
    others = [name for name in drivers if not pair or name not in pair]
    for i in range(warmup + count):
        if pair:
            order = others + (list(pair) if i % 2 == 0 else list(reversed(pair)))
        else:
            order = others if i % 2 == 0 else list(reversed(others))
        for name in order:
            start = time.perf_counter()
            await getattr(drivers[name], op)()
            if i >= warmup:
                samples[name].append(time.perf_counter() - start)
    return samples


def pair_ratio(ours: list[float], peer: list[float]) -> float:
    """The median of the per-pair ratios: each pair ran back to back, so a slow moment of
    a shared machine moves both halves of a pair, not the verdict (row 1d)."""
    return statistics.median(o / p for o, p in zip(ours, peer, strict=True))


async def compare(codex: str, home: Path, cwd: Path, state: Path, requests: int = REQUESTS,
                  turns: int = TURNS, warmup: int = WARMUP) -> dict[str, dict[str, list[float]]]:
    settings = load_config(overrides={"codex.bin": codex}, environ={}).codex
    direct_client = await DirectClient.start(codex, home, cwd)
    async with AppServer(settings, state_dir=state, codex_home=home) as app, asyncio.TaskGroup() as tg:
        reader = tg.create_task(direct_client.read())
        drivers = {"direct": DirectDriver(direct_client), "boss": BossDriver(app)}
        for driver in drivers.values():
            await driver.setup(cwd)
        results = {"request": await measure(drivers, "request", requests, warmup),
                   "turn": await measure(drivers, "turn", turns, warmup)}
        assert direct_client.proc.stdin
        direct_client.proc.stdin.close()
        await direct_client.proc.wait()
        await reader
    return results


def _row(direct: list[float], boss: list[float]) -> dict[str, float]:
    d, b = statistics.median(direct) * 1000, statistics.median(boss) * 1000
    return {"direct_ms": round(d, 3), "boss_agent_ms": round(b, 3), "ratio": round(b / d, 2)}


async def run(requests: int = REQUESTS, turns: int = TURNS, warmup: int = WARMUP) -> dict[str, Any]:
    codex = codex_bin()
    with tempfile.TemporaryDirectory(prefix="bench-appserver-") as tmp, sm.ScriptedModel() as model:
        root = Path(tmp)
        cwd = root / "work"
        cwd.mkdir()
        home = sm.write_codex_home(root / "home", model.base_url)
        samples = await compare(codex, home, cwd, root / "state", requests, turns, warmup)
    request, turn = samples["request"], samples["turn"]
    return {"warm_request_config_read": _row(request["direct"], request["boss"]),
            "warm_turn": _row(turn["direct"], turn["boss"]),
            "samples": {"requests": requests, "turns": turns}}


def print_table(results: dict[str, Any]) -> None:
    print(f"{'metric':28} {'direct ms':>10} {'boss-agent ms':>14} {'ratio':>6}")
    for name in ("warm_request_config_read", "warm_turn"):
        row = results[name]
        print(f"{name:28} {row['direct_ms']:>10.3f} {row['boss_agent_ms']:>14.3f} {row['ratio']:>6.2f}")


def main() -> dict[str, Any]:
    results = asyncio.run(run())
    print_table(results)
    return results


if __name__ == "__main__":
    main()
    sys.exit(0)
