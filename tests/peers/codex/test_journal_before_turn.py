"""The running journal is on disk before Codex acts, and its write overlaps thread/start.

The daemon as a user runs it (real ControlPlane, real codex app-server, the scripted
model), with one change: the journal's disk write is held until the test lets it go,
standing for a slow fsync. While it is held, the daemon must already have started the
task's thread (thread/start runs nothing, so it need not wait), and no turn may reach
the model: a turn that ran before its task was journaled could run twice after a crash.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from boss_agent.controlplane import ControlPlane
from boss_agent.daemon.runtime import Daemon
from boss_agent.demo import scripted_model as sm
from boss_agent.sources.boss.pairing import pair_device
from boss_agent.sources.boss.retry import BossApiRetry
from boss_agent.sources.boss.spool import RUNNING_DIR, RunningJournal
from tests.support.daemon import WAIT_S, make_config
from tests.support.runner import poll

pytestmark = pytest.mark.codex
FAST = BossApiRetry.fast()
HOLD_S = 10.0  # the longest the held write waits for the test (the unfixed daemon blocked on it)
ANSWER = "journaled first"


class HeldJournal:
    """``RunningJournal.add`` that waits for ``release`` (bounded) before writing."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.written = threading.Event()
        self.model_saw_unwritten = 0  # model requests that arrived before the write

    def wrap(self, add: Callable[..., None]) -> Callable[..., None]:
        def held_add(journal: RunningJournal, task_id: str, attempt: int) -> None:
            self.release.wait(HOLD_S)
            add(journal, task_id, attempt)
            self.written.set()
        return held_add

    def respond(self, _request: sm.RecordedRequest) -> sm.Response:
        if not self.written.is_set():
            self.model_saw_unwritten += 1
        return sm.text_reply(ANSWER)


async def _loaded_threads(daemon: Daemon) -> list[Any]:
    assert daemon.app is not None
    client = await daemon.app.client()
    loaded = await client.call("thread/loaded/list", {})
    return list((loaded or {}).get("data") or [])


async def test_thread_start_overlaps_the_journal_write_and_the_turn_waits_for_it(
    tmp_path: Path, codex_bin: str, workdir: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    held = HeldJournal()
    monkeypatch.setattr(RunningJournal, "add", held.wrap(RunningJournal.add))
    with sm.ScriptedModel(responder=held.respond) as model:
        home = sm.write_codex_home(tmp_path / "codex-home", model.base_url)
        async with ControlPlane(tmp_path / "cp" / "boss.db") as cp:
            config = make_config(tmp_path, cp.url, codex__bin=codex_bin)
            await pair_device(config.state_dir, cp.url, cp.create_pairing_code(), policy=FAST)
            daemon = Daemon(config, codex_home=home, env={"CODEX_HOME": str(home)},
                            retry_policy=FAST, claim_wait_ms=300, handle_signals=False)
            ready = asyncio.Event()
            async with asyncio.TaskGroup() as tg:
                job = tg.create_task(daemon.run(ready))
                await asyncio.wait_for(ready.wait(), 60)
                task_id = cp.submit_task("say it", workdir=str(workdir))
                try:
                    threads: list[Any] = []

                    async def thread_started() -> bool:
                        threads[:] = await _loaded_threads(daemon)
                        return bool(threads)

                    async with asyncio.timeout(WAIT_S):
                        while not await thread_started():
                            await asyncio.sleep(0.02)
                    # thread/start went out while the journal's write was still held...
                    assert not held.written.is_set()
                    # ...and nothing of the turn did.
                    assert model.requests == []
                finally:
                    held.release.set()
                await poll(lambda: cp.task(task_id)["status"] in ("completed", "failed", "cancelled"),
                           timeout=60)
                daemon.request_stop()
                await asyncio.wait_for(job, WAIT_S)
            view = cp.task(task_id)
    assert view["result"]["status"] == "completed", view["result"]
    assert view["result"]["resultText"] == ANSWER
    assert held.model_saw_unwritten == 0
    assert list((config.state_dir / RUNNING_DIR).iterdir()) == []  # removed once the result was spooled
