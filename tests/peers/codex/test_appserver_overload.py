"""Overload (-32001): codex really emits it under a burst; the client stays under it and
retries it.

codex cannot be made to overload on cue, so the retry itself is proven against the one
legitimate stub: a small JSON-RPC server on a real unix socket (WebSocket framing, as
codex's unix listener) that answers -32001 a set number of times.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection, unix_serve

from boss_agent.appserver.client import AppServer
from boss_agent.appserver.connect import Connector, dial
from boss_agent.appserver.methods import AppServerClient, OverloadRetry
from boss_agent.appserver.rpc import Dispatcher
from boss_agent.errors import METHOD_NOT_FOUND, SERVER_OVERLOADED, ServerOverloaded
from tests.support.appserver import codex_settings

BURST = 3000  # on codex 0.171, 3000 pipelined config/read got ~700 overload replies
BURST_TIMEOUT_S = 60
CONCURRENT_CALLS = 400
SERVER_REQUESTS = {0: "item/commandExecution/requestApproval", 1: "item/fileChange/requestApproval",
                   2: "item/tool/requestUserInput", 3: "item/tool/call", 4: "no/such/request"}
FAST = OverloadRetry(max_retries=3, initial_s=0.001, max_s=0.005, jitter_s=0.001)


@pytest.mark.codex
async def test_a_raw_burst_makes_real_codex_answer_server_overloaded(
    codex_bin: str, codex_home: Path, tmp_path: Path,
) -> None:
    conn = await Connector(codex_settings(codex_bin), state_dir=tmp_path / "s",
                           codex_home=codex_home).open_stdio()
    stdin = conn.child.proc.stdin if conn.child else None
    assert stdin is not None
    frames = aiter(conn.transport)
    await conn.transport.send({"id": 0, "method": "initialize",
                               "params": {"clientInfo": {"name": "burst", "version": "0"}}})
    assert "result" in await anext(frames)
    await conn.transport.send({"method": "initialized"})
    # One write, no waiting: exactly the pipelining our client's semaphore prevents.
    stdin.write(b"".join(json.dumps({"id": i, "method": "config/read", "params": {}}).encode() + b"\n"
                         for i in range(1, BURST + 1)))
    codes: Counter[int] = Counter()
    try:
        async with asyncio.timeout(BURST_TIMEOUT_S):
            async for message in frames:
                if isinstance(message, dict) and "error" in message:
                    codes[message["error"]["code"]] += 1
                    break
    finally:
        await conn.close()
    assert codes[SERVER_OVERLOADED] == 1


@pytest.mark.codex
async def test_a_burst_of_concurrent_calls_all_succeed_through_the_client(
    codex_bin: str, codex_home: Path, tmp_path: Path,
) -> None:
    async with AppServer(codex_settings(codex_bin), state_dir=tmp_path / "s", codex_home=codex_home,
                         overload_policy=FAST) as app:
        client = await app.client()
        results = await asyncio.gather(*(client.call("config/read", {}) for _ in range(CONCURRENT_CALLS)))
    assert all("config" in result for result in results)


# ------------------------------------------------------------------ the stub


class OverloadingServer:
    """JSON-RPC over WebSocket on a unix socket: method ``flaky:N`` is overloaded N times."""

    def __init__(self) -> None:
        self.attempts: Counter[str] = Counter()
        self.answers: dict[int, dict[str, Any]] = {}
        self.all_answered = asyncio.Event()
        self.request_ids: list[Any] = []

    async def handle(self, ws: ServerConnection) -> None:
        await ws.send("this is not json")  # must be counted, not fatal
        await ws.send(json.dumps({"id": 424242, "result": {}}))  # nobody asked: dropped
        for request_id, method in SERVER_REQUESTS.items():  # nobody listens: defaults
            await ws.send(json.dumps({"id": request_id, "method": method, "params": {"threadId": "t"}}))
        async for frame in ws:
            request = json.loads(frame)
            if "method" not in request:
                self.answers[request["id"]] = request
                if len(self.answers) == len(SERVER_REQUESTS):
                    self.all_answered.set()
                continue
            self.request_ids.append(request["id"])
            method = request["method"]
            self.attempts[method] += 1
            overloads = int(method.split(":")[1])
            if self.attempts[method] <= overloads:
                reply: dict[str, Any] = {"id": request["id"], "error": {
                    "code": SERVER_OVERLOADED, "message": "Server overloaded; retry later."}}
            else:
                reply = {"id": request["id"], "result": {"attempt": self.attempts[method]}}
            await ws.send(json.dumps(reply))


@pytest.fixture
async def stub_client(tmp_path: Path) -> AsyncIterator[tuple[AppServerClient, OverloadingServer]]:
    stub = OverloadingServer()
    path = tmp_path / "stub.sock"
    async with unix_serve(stub.handle, str(path)):
        ids = (f"boss-{n}" for n in itertools.count())  # injectable: string ids round-trip
        dispatcher = Dispatcher(await dial(f"unix://{path}", None), ids=ids)
        async with asyncio.TaskGroup() as tg:
            tg.create_task(dispatcher.run())
            yield AppServerClient(dispatcher, timeout_s=10, policy=FAST), stub
            await dispatcher.transport.close()


async def test_server_overloaded_twice_is_retried_until_it_succeeds(
    stub_client: tuple[AppServerClient, OverloadingServer],
) -> None:
    client, stub = stub_client
    assert await client.call("flaky:2") == {"attempt": 3}
    assert stub.attempts["flaky:2"] == 3
    assert client.dispatcher.invalid_messages == 1  # the garbage frame, and the pump lived on


async def test_server_overloaded_beyond_three_retries_raises_it(
    stub_client: tuple[AppServerClient, OverloadingServer],
) -> None:
    client, stub = stub_client
    with pytest.raises(ServerOverloaded) as raised:
        await client.call("flaky:10")
    assert raised.value.code == SERVER_OVERLOADED
    assert stub.attempts["flaky:10"] == 4  # the first try and three retries
    assert client.dispatcher.pending_count == 0


async def test_server_requests_nobody_listens_to_get_safe_defaults_at_once(
    stub_client: tuple[AppServerClient, OverloadingServer],
) -> None:
    client, stub = stub_client
    assert await client.call("flaky:0") == {"attempt": 1}
    async with asyncio.timeout(10):
        await stub.all_answered.wait()
    results = {i: stub.answers[i].get("result") for i in range(4)}
    assert results == {0: {"decision": "decline"}, 1: {"decision": "decline"}, 2: {"answers": {}},
                       3: {"contentItems": [], "success": False}}
    assert stub.answers[4]["error"]["code"] == METHOD_NOT_FOUND
    assert stub.request_ids == ["boss-0"]
