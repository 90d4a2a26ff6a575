"""What the older releases of the supported range need, on the real binary under test.

Before 0.169 two app-servers starting at once on a brand-new CODEX_HOME crash one of
them ("failed to initialize sqlite state runtime"; on 0.150 two rounds in four): the
first start on a fresh home runs alone (appserver/first_start.py). Up to 0.160 a steer
waits for the model's response in flight: its card says it is queued. Before 0.171 a
thread let go stays loaded: no thread is made ahead.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from boss_agent.appserver.client import AppServer
from boss_agent.codexfeatures import detect
from boss_agent.demo import scripted_model as sm
from boss_agent.runner import Runner
from tests.support.appserver import codex_settings
from tests.support.security import hostile
from tests.support.config import make_config
from tests.support.runner import Sink

pytestmark = pytest.mark.codex

ROUNDS = 4  # the crash took one round in two on 0.150; four make a pass meaningful
EVENT_TIMEOUT_S = 60


async def _start(codex_bin: str, home: Path, state_dir: Path) -> int:
    async with AppServer(codex_settings(codex_bin), state_dir=state_dir, codex_home=home) as app:
        client = await app.client()
        await client.call("thread/loaded/list", {})
        return app.restarts


async def test_two_app_servers_starting_at_once_on_a_fresh_codex_home_both_come_up_first_time(
        tmp_path: Path, codex_bin: str, scripted_model: sm.ScriptedModel) -> None:
    for round_ in range(ROUNDS):
        home = sm.write_codex_home(tmp_path / f"home-{round_}", scripted_model.base_url)
        async with asyncio.timeout(EVENT_TIMEOUT_S):
            restarts = await asyncio.gather(*(_start(codex_bin, home, tmp_path / f"state-{round_}-{k}")
                                              for k in range(2)))
        assert restarts == [0, 0], f"round {round_}: an app-server had to be restarted"


class LiveSink(Sink):
    """Also records the live thread and turn, which a steer names."""

    def __init__(self) -> None:
        super().__init__()
        self.live: list[tuple[str, str]] = []

    async def turn_started(self, thread_ref: str, turn_id: str) -> None:
        self.live.append((thread_ref, turn_id))
        self.changed.set()


def _warnings(sink: Sink) -> list[str]:
    return [w["kind"] for w in (sink.cards[-1].get("warnings") or [])] if sink.cards else []


async def test_a_steer_codex_holds_back_behind_the_response_in_flight_is_shown_as_queued(
        tmp_path: Path, codex_bin: str, codex_home: Path, scripted_model: sm.ScriptedModel) -> None:
    queues = not detect(codex_bin, tmp_path / "features").immediate_steer  # measured per release
    config = make_config(tmp_path, codex_bin)
    # A slow answer (eight chunks a second apart): the model's response is in flight.
    scripted_model.enqueue(sm.turn(sm.message("a long answer", ["a "] * 8), delay_s=1.0),
                           sm.text_reply("steered"))
    first, second = LiveSink(), Sink()
    async with AppServer.from_config(config, codex_home=codex_home) as app, asyncio.TaskGroup() as tg:
        runner = Runner(config, app, codex_home=codex_home)
        original = tg.create_task(runner.run(hostile(taskId="t-long", workdir=str(config.workspaces[0])),
                                             first, asyncio.Event()))
        await first.until(lambda: bool(first.live) and len(scripted_model.requests) >= 1)
        thread_ref, turn_id = first.live[0]
        steer = await runner.run(hostile(taskId="t-steer", prompt="focus", workdir=str(config.workspaces[0]),
                                         codexThreadRef=thread_ref, targetCodexTurnId=turn_id),
                                 second, asyncio.Event())
    assert steer.status == "completed" and original.result().status == "completed"
    assert ("steerQueued" in _warnings(second)) is queues
    assert "focus" in scripted_model.requests[-1].input_texts()


async def test_a_thread_is_made_ahead_only_on_a_codex_that_unloads_a_thread_let_go(
        tmp_path: Path, codex_bin: str, codex_home: Path, scripted_model: sm.ScriptedModel) -> None:
    # 0.150 keeps an unsubscribed thread loaded: every thread made ahead that a task did not
    # fit would stay, so none is made there (runner/thread_ahead.py, codexfeatures.py).
    unloads = detect(codex_bin, tmp_path / "features").thread_unload  # measured per release
    config = make_config(tmp_path, codex_bin)
    scripted_model.enqueue(sm.text_reply("done"))
    async with AppServer.from_config(config, codex_home=codex_home) as app:
        runner = Runner(config, app, codex_home=codex_home)
        try:
            result = await asyncio.wait_for(runner.run(
                hostile(taskId="t-ahead", workdir=str(config.workspaces[0])), Sink(), asyncio.Event()),
                EVENT_TIMEOUT_S)
            await asyncio.wait_for(runner.ahead.settled(), EVENT_TIMEOUT_S)
            assert result.status == "completed"
            assert (runner.ahead.held is not None) is unloads
        finally:
            await runner.aclose()
