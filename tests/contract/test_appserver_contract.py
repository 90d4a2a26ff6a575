"""The in-memory app-server and real codex agree: the same scenarios, the same outcomes.

``tests/support/appserver_memory.py`` is a fake at the client seam; the runner's
millisecond tests (tests/unit/test_runner_control_flow.py) are only as true as it is.
Each scenario here runs twice through the real ``Runner``: once on the fake (a turn
script) and once on the real codex binary driven by the scripted model (model
responses that make codex do the same thing). What the runner reports (status, error
code, approval statuses, answer) must be the same on both. A steer needs two tasks on
one turn, so it has a test of its own over the same two peers.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from boss_agent.appserver.client import AppServer
from boss_agent.demo import scripted_model as sm
from boss_agent.runner import Runner
from boss_agent.tasks import ApprovalRequest, Task
from tests.support.appserver_memory import FakeTurn, MemoryAppServer, Script
from tests.support.approvals import ParentAndChild
from tests.support.runner import WAIT_S, Sink, module_env
from tests.support.waits import eventually

pytestmark = pytest.mark.asyncio

COMMAND = "touch approved.txt"


def _shell(cmd: str) -> list[dict[str, Any]]:
    # login=False: a login shell sources ~/.bashrc, which on this box can block on pyenv's rehash lock.
    return sm.shell_call(cmd, login=False)


async def _answer(turn: FakeTurn) -> None:
    await turn.say("the answer")


async def _command_then_answer(turn: FakeTurn) -> None:
    if await turn.ask_command(COMMAND) == "accept":
        await turn.say("after the command")


async def _command(turn: FakeTurn) -> None:
    await turn.ask_command(COMMAND)


async def _fails(turn: FakeTurn) -> None:
    turn.fail("unexpected status 401 Unauthorized: Incorrect API key provided")


async def _steered(turn: FakeTurn) -> None:
    await turn.say("working on it")
    await turn.wait_steer()
    await turn.say("steered answer")


async def _sub_agent_asks(turn: FakeTurn) -> None:
    child = await turn.spawn_child()
    await child.ask_command(COMMAND)
    await turn.say("the sub-agent made the marker")


@dataclass(frozen=True)
class Scenario:
    name: str
    model: list[sm.Response]  # what real codex's model says
    script: Script  # what the fake does instead
    on_approval: str  # accept | cancel | lose
    expect: dict[str, Any] = field(default_factory=dict)
    responder: Callable[[], sm.Responder] | None = None  # real codex: a fresh model that answers by request
    slug: str = "gpt-5.5"  # the model name codex is told (an unknown one gets the sub-agent tools)


SCENARIOS = [
    Scenario("answer", [sm.text_reply("the answer")], _answer, "accept",
             {"status": "completed", "error_code": None, "approvals": [], "answer": "the answer"}),
    Scenario("approval accepted", [sm.turn(_shell(COMMAND)), sm.text_reply("after the command")],
             _command_then_answer, "accept",
             {"status": "completed", "error_code": None, "approvals": ["accepted"],
              "answer": "after the command"}),
    Scenario("cancel while an approval waits", [sm.turn(_shell(COMMAND))], _command, "cancel",
             {"status": "cancelled", "error_code": "cancelled", "approvals": ["cancelled"], "answer": None}),
    Scenario("turn failed", [sm.http_error(401, "invalid_api_key", "Incorrect API key provided")], _fails,
             "accept", {"status": "failed", "error_code": "codex_turn_failed", "approvals": [], "answer": None}),
    Scenario("app-server lost mid-turn", [sm.turn(_shell(COMMAND))], _command, "lose",
             {"status": "failed", "error_code": "app_server_lost", "approvals": ["cancelled"], "answer": None}),
    Scenario("a sub-agent's approval", [], _sub_agent_asks, "accept",
             {"status": "completed", "error_code": None, "approvals": ["accepted"],
              "answer": "the sub-agent made the marker"},
             responder=lambda: ParentAndChild(COMMAND), slug="mock-model"),
]
# Real codex: the first answer hangs until the steer makes codex sample again with it.
STEER = Scenario("steer", [sm.hang(sm.message("working on it", ["working ", "on it"])),
                           sm.text_reply("steered answer")], _steered, "accept")


@dataclass
class Peer:
    """One side of the contract: the runner's app-server, how to script it, how to kill it."""

    app: Any
    arrange: Callable[[Scenario], None]
    lose: Callable[[], None]
    config: Any
    root: Path


@pytest_asyncio.fixture(params=["memory", pytest.param("codex", marks=pytest.mark.codex)])
async def peer(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Peer]:
    if request.param == "memory":
        env = module_env(tmp_path, _NoModel(), "/nonexistent/codex")
        memory = MemoryAppServer()
        yield Peer(memory, lambda s: memory.codex.enqueue(s.script), memory.codex.lose_connection,
                   env["config"], env["root"])
        return
    codex_bin = request.getfixturevalue("codex_bin")
    scenario: Scenario = request.node.callspec.params.get("scenario", STEER)
    with sm.ScriptedModel(scenario.responder() if scenario.responder else None) as model:
        env = module_env(tmp_path, model, codex_bin)
        sm.write_codex_home(env["home"], model.base_url, model=scenario.slug)
        async with AppServer.from_config(env["config"], codex_home=env["home"]) as app:

            def kill() -> None:
                assert app.child_pid is not None
                os.killpg(app.child_pid, signal.SIGKILL)

            yield Peer(app, lambda s: model.enqueue(*s.model), kill, env["config"], env["root"])


class _NoModel:
    base_url = "http://127.0.0.1:9/unused"  # the fake never calls a model


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
async def test_the_runner_sees_the_same_outcome_on_both_app_servers(peer: Peer, scenario: Scenario) -> None:
    peer.arrange(scenario)
    cancel = asyncio.Event()

    async def decide(_request: ApprovalRequest) -> str:
        if scenario.on_approval == "accept":
            return "accept"
        if scenario.on_approval == "cancel":
            cancel.set()
        else:
            peer.lose()
        await asyncio.Event().wait()  # never decides: the runner must stop waiting
        return "accept"

    workdir = peer.root / "work"
    workdir.mkdir()
    runner = Runner(peer.config, peer.app)
    async with asyncio.timeout(WAIT_S):
        result = await runner.run(Task("t-contract", "do it", workdir=str(workdir), approval_policy="untrusted"),
                                  Sink(decide), cancel)
    observed = {"status": result.status, "error_code": result.error_code,
                "approvals": [a["status"] for a in result.execution_progress.get("approvals", [])],
                "answer": result.result_text}
    assert observed == scenario.expect


class TurnSink(Sink):
    """A ``Sink`` that also records the turn the runner started."""

    def __init__(self) -> None:
        super().__init__()
        self.turn: tuple[str, str] | None = None

    async def turn_started(self, thread_ref: str, turn_id: str) -> None:
        self.turn = (thread_ref, turn_id)
        self.changed.set()


@pytest.mark.codex_feature("immediate_steer")  # 0.150 holds a steer behind the response in flight
async def test_a_steer_joins_the_running_turn_on_both_app_servers(peer: Peer) -> None:
    peer.arrange(STEER)
    workdir = peer.root / "work"
    workdir.mkdir()
    runner = Runner(peer.config, peer.app)
    first_sink = TurnSink()
    async with asyncio.timeout(WAIT_S), asyncio.TaskGroup() as tg:
        first = tg.create_task(runner.run(Task("t-first", "do it", workdir=str(workdir)), first_sink,
                                          asyncio.Event()))
        await eventually(lambda: first_sink.turn, WAIT_S, changed=first_sink.changed)
        assert first_sink.turn is not None
        thread_id, turn_id = first_sink.turn
        steer = await runner.run(Task("t-steer", "focus on the tests", workdir=str(workdir),
                                      codex_thread_ref=thread_id, target_turn_id=turn_id), Sink(), asyncio.Event())
    held = first.result()
    assert (steer.status, steer.error_code, steer.turn_id, steer.result_text) == (
        "completed", None, turn_id, "steered answer"), steer
    assert (held.status, held.turn_id) == ("completed", turn_id), held
