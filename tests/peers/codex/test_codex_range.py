"""What the older releases of the supported range need, on the real binary under test.

Before 0.169 two app-servers starting at once on a brand-new CODEX_HOME crash one of
them ("failed to initialize sqlite state runtime"; on 0.150 two rounds in four): the
first start on a fresh home runs alone (appserver/first_start.py).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from boss_agent.appserver.client import AppServer
from boss_agent.demo import scripted_model as sm
from tests.peers.codex.test_appserver_transports import codex_settings

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
