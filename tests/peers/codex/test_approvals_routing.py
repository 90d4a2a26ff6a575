"""Routing of what is not addressed to one thread: sub-agents and connection-level notes.

The real-codex test runs a plain turn: codex sends ``account/rateLimits/updated`` after
every model response with no ``threadId``; before the fix no task's card ever saw it.
The router tests feed the dispatcher's ``Router`` directly with shapes codex 0.171
documents but this offline setup cannot provoke (a ``thread/started`` naming its parent,
a ``configWarning``): synthetic, said so.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from boss_agent.appserver.client import AppServer
from boss_agent.appserver.routing import Notification, Router, ServerRequest, ThreadListener
from boss_agent.demo import scripted_model as sm
from boss_agent.runner import Runner
from boss_agent.tasks import Task
from tests.support.runner import Sink, module_env


def _note(method: str, params: dict[str, Any]) -> Notification:
    return Notification(method, params, {"method": method, "params": params})


def _queued(listener: ThreadListener) -> list[str]:
    out = []
    while not listener._queue.empty():  # test-only peek at what was delivered
        out.append(getattr(listener._queue.get_nowait(), "method", "?"))
    return out


async def _nobody(*_args: Any) -> None:
    return None


def test_connection_level_notes_reach_every_thread_listener_and_thread_notes_only_theirs() -> None:
    router = Router()
    first, second = ThreadListener({"t1"}), ThreadListener({"t2"})
    router.add(first)
    router.add(second)
    router.notification(_note("configWarning", {"summary": "bad key"}))
    router.notification(_note("account/rateLimits/updated", {"rateLimits": {}}))
    router.notification(_note("warning", {"threadId": "t1", "message": "only t1"}))
    assert _queued(first) == ["configWarning", "account/rateLimits/updated", "warning"]
    assert _queued(second) == ["configWarning", "account/rateLimits/updated"]


def test_a_thread_started_by_a_listeners_thread_is_routed_to_it_before_its_first_request() -> None:
    router = Router()
    parent = ThreadListener({"p"})
    router.add(parent)
    router.notification(_note("thread/started", {"thread": {"id": "c", "parentThreadId": "p"}}))
    request = ServerRequest(0, "item/commandExecution/requestApproval", {"threadId": "c"}, _nobody)
    assert router.take(request)
    assert _queued(parent) == ["thread/started", "item/commandExecution/requestApproval"]


def test_a_turn_whose_root_is_a_listeners_turn_routes_its_thread() -> None:
    router = Router()
    parent, other = ThreadListener({"p"}), ThreadListener({"x"})
    router.add(other)
    router.add(parent)
    router.notification(_note("turn/started", {"threadId": "p", "turn": {"id": "u1", "rootTurnId": "u1"}}))
    router.notification(_note("turn/started", {"threadId": "c", "turn": {"id": "u2", "rootTurnId": "u1"}}))
    assert router.take(ServerRequest(1, "item/fileChange/requestApproval", {"threadId": "c"}, _nobody))
    assert _queued(parent)[-1] == "item/fileChange/requestApproval"
    assert _queued(other) == []


def test_a_request_goes_to_the_listener_whose_turn_asked_also_on_a_shared_thread() -> None:
    # Two tasks' listeners on one thread (a steer beside its turn, or a task whose turn
    # just ended): the first added is not the one asked, the turn's owner is.
    router = Router()
    earlier, asker = ThreadListener({"p"}), ThreadListener({"p"})
    router.add(earlier)
    router.add(asker)
    earlier.claim_turn("u-earlier")
    asker.claim_turn("u-asker")
    router.notification(_note("turn/started", {"threadId": "c", "turn": {"id": "u-child", "rootTurnId": "u-asker"}}))
    assert router.take(ServerRequest(0, "item/commandExecution/requestApproval",
                                     {"threadId": "p", "turnId": "u-asker"}, _nobody))
    assert router.take(ServerRequest(1, "item/commandExecution/requestApproval",
                                     {"threadId": "c", "turnId": "u-child"}, _nobody))  # its sub-agent
    assert router.take(ServerRequest(2, "item/commandExecution/requestApproval",
                                     {"threadId": "p", "turnId": "u-earlier"}, _nobody))
    assert [r.id for r in asker.pending_requests()] == [0, 1]
    assert [r.id for r in earlier.pending_requests()] == [2]


@pytest_asyncio.fixture
async def env(tmp_path: Any, scripted_model: sm.ScriptedModel, codex_bin: str) -> AsyncIterator[dict[str, Any]]:
    env = module_env(tmp_path, scripted_model, codex_bin)
    async with AppServer.from_config(env["config"], codex_home=env["home"]) as server:
        yield {**env, "app": server}


@pytest.mark.codex
async def test_rate_limit_updates_without_a_thread_reach_the_running_tasks_card(
        env: dict[str, Any], scripted_model: sm.ScriptedModel) -> None:
    scripted_model.enqueue(sm.text_reply("hello"))
    work = env["root"] / "plain"
    work.mkdir()
    sink = Sink()
    result = await Runner(env["config"], env["app"], codex_home=env["home"]).run(
        Task("t-limits", "hi", workdir=str(work)), sink, asyncio.Event())
    assert result.status == "completed", result
    assert result.execution_progress["accountStatus"] is not None
