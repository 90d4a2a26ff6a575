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

from boss_agent.daemon.runtime import Daemon
from boss_agent.demo import scripted_model as sm
from boss_agent.sources.boss.spool import RUNNING_DIR, RunningJournal
from tests.support.approvals import daemon_on_codex
from tests.support.daemon import WAIT_S

pytestmark = pytest.mark.codex
POLL_S = 0.02  # how often the test asks the app-server for loaded threads (no event says so)
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
        async with daemon_on_codex(tmp_path, codex_bin, home) as setup:
            task_id = setup.cp.submit_task("say it", workdir=str(workdir))
            try:
                async with asyncio.timeout(WAIT_S):
                    while not await _loaded_threads(setup.daemon):
                        await asyncio.sleep(POLL_S)
                # thread/start went out while the journal's write was still held...
                assert not held.written.is_set()
                # ...and nothing of the turn did.
                assert model.requests == []
            finally:
                held.release.set()
            await setup.until(lambda: setup.task(task_id)["status"] in ("completed", "failed", "cancelled"))
            view = setup.task(task_id)
            state_dir = setup.daemon.config.state_dir
    assert view["result"]["status"] == "completed", view["result"]
    assert view["result"]["resultText"] == ANSWER
    assert held.model_saw_unwritten == 0
    assert list((state_dir / RUNNING_DIR).iterdir()) == []  # removed once the result was spooled
