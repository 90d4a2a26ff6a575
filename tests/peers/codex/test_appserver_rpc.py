"""Dispatcher and supervision behaviour against the real codex binary.

Server-request routing (approvals under per-thread ``approvalPolicy: "untrusted"``),
a killed child failing every in-flight request at once and being restarted, and
``turn/start`` never starting a second turn when its answer is lost.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from boss_agent.demo import scripted_model as sm
from boss_agent.appserver import connect
from boss_agent.appserver.client import AppServer, RestartBackoff
from boss_agent.appserver.connect import Connector
from boss_agent.appserver.methods import AppServerClient
from boss_agent.appserver.routing import ServerRequest
from boss_agent.appserver.transports import Incoming, Transport
from boss_agent.errors import ConnectionClosed, RequestTimeout
from tests.support.appserver import codex_settings

pytestmark = pytest.mark.codex

EVENT_TIMEOUT_S = 30
FAST_RESTART = RestartBackoff(initial_s=0.01, max_s=0.05, jitter_s=0.01)
APPROVAL = "item/commandExecution/requestApproval"


@pytest.fixture
async def app(codex_bin: str, codex_home: Path, tmp_path: Path) -> AsyncIterator[AppServer]:
    settings = codex_settings(codex_bin)
    async with AppServer(settings, state_dir=tmp_path / "state", codex_home=codex_home,
                         restart_policy=FAST_RESTART) as server:
        yield server


def script_touch(model: sm.ScriptedModel, workdir: Path) -> None:
    # login=False: a login shell sources the user's profile, which on a developer box can
    # be slow or block (pyenv rehash); the test is about the approval, not the shell.
    model.enqueue(
        sm.turn(sm.shell_call("touch approved.txt && echo created", call_id="call_sh",
                              workdir=str(workdir), login=False)),
        sm.text_reply("done"),
    )


async def test_an_approval_reaches_the_threads_listener_and_accept_runs_the_command(
    app: AppServer, workdir: Path, scripted_model: sm.ScriptedModel,
) -> None:
    script_touch(scripted_model, workdir)
    client = await app.client()
    thread = (await client.thread_start(cwd=str(workdir), approvalPolicy="untrusted"))["thread"]
    seen: list[str] = []
    async with client.listen(thread["id"]) as listener, asyncio.timeout(EVENT_TIMEOUT_S):
        await client.turn_start(thread["id"], [{"type": "text", "text": "make the file"}])
        async for delivery in listener:
            seen.append(delivery.method)
            if isinstance(delivery, ServerRequest):
                assert delivery.method == APPROVAL
                assert delivery.params["itemId"] == "call_sh"
                await delivery.respond({"decision": "accept"})
                await delivery.respond({"decision": "decline"})  # ignored: answered once
                assert delivery.answered
            if delivery.method == "turn/completed":
                assert delivery.params["turn"]["status"] == "completed"
                break
    assert seen.count(APPROVAL) == 1
    assert seen.index(APPROVAL) < seen.index("serverRequest/resolved")
    assert (workdir / "approved.txt").exists()


async def test_an_unrouted_approval_is_declined_by_default(
    app: AppServer, workdir: Path, scripted_model: sm.ScriptedModel,
) -> None:
    script_touch(scripted_model, workdir)
    client = await app.client()
    thread = (await client.thread_start(cwd=str(workdir), approvalPolicy="untrusted"))["thread"]
    statuses: dict[str, str] = {}
    async with client.listen_all() as everything, asyncio.timeout(EVENT_TIMEOUT_S):
        await client.turn_start(thread["id"], [{"type": "text", "text": "make the file"}])
        async for note in everything:
            assert not isinstance(note, ServerRequest), "listen_all never takes server requests"
            if note.method == "item/completed":
                statuses[note.params["item"]["id"]] = note.params["item"].get("status")
            if note.method == "turn/completed":
                break
    assert statuses["call_sh"] == "declined"
    assert not (workdir / "approved.txt").exists()
    second = scripted_model.requests[1]
    assert "rejected by user" in second.tool_outputs()["call_sh"]


async def test_a_request_its_listener_left_unanswered_is_declined_when_the_listener_leaves(
    app: AppServer, workdir: Path, scripted_model: sm.ScriptedModel,
) -> None:
    script_touch(scripted_model, workdir)
    client = await app.client()
    thread = (await client.thread_start(cwd=str(workdir), approvalPolicy="untrusted"))["thread"]
    async with client.listen_all() as everything, asyncio.timeout(EVENT_TIMEOUT_S):
        async with client.listen(thread["id"]) as listener:
            await client.turn_start(thread["id"], [{"type": "text", "text": "make the file"}])
            async for delivery in listener:
                if isinstance(delivery, ServerRequest):
                    break  # taken, never answered: leaving must not leave codex waiting
        async for note in everything:
            if note.method == "turn/completed":
                break
    assert "rejected by user" in scripted_model.requests[1].tool_outputs()["call_sh"]
    assert not (workdir / "approved.txt").exists()


@pytest.mark.parametrize("transport", ["stdio", "ws"])
async def test_a_killed_child_fails_pending_requests_at_once_and_the_next_request_works(
    transport: str, codex_bin: str, codex_home: Path, workdir: Path, tmp_path: Path,
) -> None:
    settings = codex_settings(codex_bin, app_server_transport=transport)
    async with AppServer(settings, state_dir=tmp_path / "state", codex_home=codex_home,
                         restart_policy=FAST_RESTART) as app:
        await kill_and_recover(app, workdir)
        assert app.status["transport"] == transport


async def kill_and_recover(app: AppServer, workdir: Path) -> None:
    client = await app.client()
    thread = (await client.thread_start(cwd=str(workdir)))["thread"]
    pid = app.child_pid
    assert pid is not None
    os.killpg(pid, signal.SIGSTOP)  # freeze codex so the next request stays in flight
    async with client.listen(thread["id"]) as listener:
        pending = asyncio.ensure_future(client.call("thread/loaded/list", {}, timeout=3600))
        async with asyncio.timeout(EVENT_TIMEOUT_S):
            while client.dispatcher.pending_count == 0:
                await asyncio.sleep(0)  # let the request reach the pipe
        os.killpg(pid, signal.SIGKILL)
        # The request's own deadline is an hour: only the closed connection can end it.
        with pytest.raises(ConnectionClosed):
            async with asyncio.timeout(EVENT_TIMEOUT_S):
                await pending
        with pytest.raises(ConnectionClosed):
            async with asyncio.timeout(EVENT_TIMEOUT_S):
                async for _ in listener:
                    pass  # notifications queued before the kill come first, then the error
    assert client.closed
    restarted = await app.client()
    assert restarted is not client and app.child_pid != pid
    loaded = await restarted.call("thread/loaded/list", {})
    assert loaded["data"] == []  # a fresh process: nothing loaded until resumed
    assert app.status["available"] and app.restarts == 1


# --------------------------------------------------------- lost answers


class LossyTransport:
    """Wraps a real transport and loses what ``lose`` picks: the request or its answer.

    codex cannot be made to drop a reply on cue, so this is the one seam we cut.
    """

    def __init__(self, inner: Transport, method: str, lose: str, *, untag: bool = False) -> None:
        self.inner, self.kind = inner, inner.kind
        self.method, self.lose = method, lose
        self.untag = untag  # drop clientUserMessageId on the way, as codex 0.135 ignores it
        self.victim: Any = None

    async def send(self, message: dict[str, Any]) -> None:
        if message.get("method") == self.method and self.victim is None:
            self.victim = message["id"]
            if self.lose == "request":
                return
            if self.untag:
                message = {**message, "params": {k: v for k, v in message["params"].items()
                                                 if k != "clientUserMessageId"}}
        await self.inner.send(message)

    async def __aiter__(self) -> AsyncIterator[Incoming]:
        async for message in self.inner:
            if self.lose == "answer" and isinstance(message, dict) and "method" not in message \
                    and message.get("id") == self.victim:
                continue
            yield message

    async def close(self) -> None:
        await self.inner.close()


@pytest.mark.parametrize("lose", ["answer", "request"])
async def test_turn_start_after_a_timeout_never_starts_a_second_turn(
    lose: str, codex_bin: str, codex_home: Path, workdir: Path, tmp_path: Path,
    scripted_model: sm.ScriptedModel,
) -> None:
    scripted_model.enqueue(sm.text_reply("only once"))
    connector = Connector(codex_settings(codex_bin), state_dir=tmp_path / "state", codex_home=codex_home)
    conn = await connector.open_stdio()
    conn.transport = LossyTransport(conn.transport, "turn/start", lose)
    conn.dispatcher.transport = conn.transport
    client = AppServerClient(conn.dispatcher, timeout_s=2)
    turns: list[dict[str, Any]] = []

    async def scenario() -> None:
        await client.initialize()
        thread = (await client.thread_start(cwd=str(workdir)))["thread"]
        async with client.listen(thread["id"]) as listener:
            turns.append(await client.turn_start(thread["id"], [{"type": "text", "text": "once"}]))
            async for note in listener:
                if note.method == "turn/completed":
                    break
        turns.append(await client.thread_turns_list(thread["id"]))
        await conn.close()

    async with asyncio.timeout(EVENT_TIMEOUT_S):
        await conn.run(scenario)
    started, listed = turns
    assert [t["id"] for t in listed["data"]] == [started["turn"]["id"]]
    assert len(scripted_model.requests) == 1


async def test_a_lost_turn_start_answer_is_not_resent_when_codex_cannot_show_it_did_not_run(
    codex_bin: str, codex_home: Path, workdir: Path, tmp_path: Path, scripted_model: sm.ScriptedModel,
) -> None:
    """A codex that drops the tag (0.135) shows an untagged user message: it may be ours."""
    scripted_model.enqueue(sm.text_reply("only once"))
    connector = Connector(codex_settings(codex_bin), state_dir=tmp_path / "state", codex_home=codex_home)
    conn = await connector.open_stdio()
    conn.transport = LossyTransport(conn.transport, "turn/start", "answer", untag=True)
    conn.dispatcher.transport = conn.transport
    client = AppServerClient(conn.dispatcher, timeout_s=2)
    listed: list[dict[str, Any]] = []

    async def scenario() -> None:
        await client.initialize()
        thread = (await client.thread_start(cwd=str(workdir)))["thread"]
        async with client.listen(thread["id"]) as listener:
            with pytest.raises(RequestTimeout):
                await client.turn_start(thread["id"], [{"type": "text", "text": "once"}])
            async for note in listener:
                if note.method == "turn/completed":
                    break
        listed.append(await client.thread_turns_list(thread["id"]))
        await conn.close()

    async with asyncio.timeout(EVENT_TIMEOUT_S):
        await conn.run(scenario)
    assert len(listed[0]["data"]) == 1 and len(scripted_model.requests) == 1


@pytest.mark.parametrize("transport", ["stdio", "ws"])  # a request probe; /readyz of our listener
async def test_a_wedged_child_fails_its_health_probe_and_is_restarted(
    transport: str, codex_bin: str, codex_home: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(connect, "HEALTH_INTERVAL_S", 0.1)  # production: 30 s
    monkeypatch.setattr(connect, "HEALTH_TIMEOUT_S", 0.5)
    settings = codex_settings(codex_bin, app_server_transport=transport)
    async with AppServer(settings, state_dir=tmp_path / "state",
                         codex_home=codex_home, restart_policy=FAST_RESTART) as app:
        client = await app.client()
        pid = app.child_pid
        assert pid is not None
        os.killpg(pid, signal.SIGSTOP)  # alive but deaf: only the probe can notice
        async with asyncio.timeout(EVENT_TIMEOUT_S):
            await client.dispatcher.closed.wait()
        restarted = await app.client()
        assert app.child_pid != pid
        assert "config" in await restarted.call("config/read", {})
