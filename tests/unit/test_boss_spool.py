"""The durable pieces: identity files, the completion spool, the running journal."""

from __future__ import annotations

import asyncio
import stat
import threading
from pathlib import Path

import pytest

from boss_agent.errors import StateError
from boss_agent.identity import Identity, forget_identity, load_identity, save_identity
from boss_agent.sources.boss.spool import (
    AGENT_RESTARTED,
    CompletionSpool,
    RunningJournal,
)
from boss_agent.sources.boss.runs import JournalRecord
from boss_agent.tasks import TaskResult

SECRET = "tok_4f9a8b7c6d5e4f3a2b1c"
WRITE_WAIT_S = 10.0  # a held journal write is released well before this


def test_the_token_file_is_owner_only_and_the_identity_round_trips(tmp_path: Path) -> None:
    save_identity(tmp_path, Identity("http://127.0.0.1:9", "dev_1", SECRET, 5000))
    mode = stat.S_IMODE((tmp_path / "device_token").stat().st_mode)
    assert mode == 0o600
    assert SECRET not in (tmp_path / "device.json").read_text()
    loaded = load_identity(tmp_path)
    assert loaded == Identity("http://127.0.0.1:9", "dev_1", SECRET, 5000)
    assert SECRET not in repr(loaded) and SECRET not in str(loaded)


def test_forgetting_the_identity_removes_token_and_id(tmp_path: Path) -> None:
    save_identity(tmp_path, Identity("http://h", "dev_1", SECRET))
    assert forget_identity(tmp_path) is True
    assert load_identity(tmp_path) is None
    assert forget_identity(tmp_path) is False


def test_a_damaged_identity_is_a_state_error_not_a_crash(tmp_path: Path) -> None:
    save_identity(tmp_path, Identity("http://h", "dev_1", SECRET))
    (tmp_path / "device.json").write_text("{not json")
    with pytest.raises(StateError):
        load_identity(tmp_path)


def test_the_spool_keeps_results_in_order_until_removed(tmp_path: Path) -> None:
    spool = CompletionSpool(tmp_path)
    spool.put_result("tsk_1", TaskResult(status="completed", result_text="one"))
    spool.put_result("tsk/../2", TaskResult(status="failed", error_code="x"))
    assert [tid for tid, _ in spool.pending()] == ["tsk_1", "tsk/../2"]
    assert all(p.parent == tmp_path / "spool" for p in (tmp_path / "spool").iterdir())
    assert spool.pending()[0][1]["resultText"] == "one"
    spool.remove("tsk_1")
    assert len(CompletionSpool(tmp_path)) == 1  # a new instance (a restart) sees the same spool
    assert "tsk/../2" in spool


def test_an_unreadable_spool_record_is_dropped_not_fatal(tmp_path: Path) -> None:
    spool = CompletionSpool(tmp_path)
    (tmp_path / "spool" / "tsk_bad.json").write_text("{")
    spool.put_result("tsk_ok", TaskResult(status="completed"))
    assert [tid for tid, _ in spool.pending()] == ["tsk_ok"]


def test_tasks_left_in_the_journal_become_agent_restarted_failures(tmp_path: Path) -> None:
    journal, spool = RunningJournal(tmp_path), CompletionSpool(tmp_path)
    journal.add("tsk_orphan", 1)
    journal.add("tsk_done", 1)
    spool.put_result("tsk_done", TaskResult(status="completed", result_text="kept"))
    assert sorted(RunningJournal(tmp_path).recover(spool)) == ["tsk_done", "tsk_orphan"]
    bodies = dict(spool.pending())
    assert bodies["tsk_orphan"]["status"] == "failed"
    assert bodies["tsk_orphan"]["error"]["code"] == AGENT_RESTARTED
    assert bodies["tsk_done"]["resultText"] == "kept"  # a spooled result is never overwritten
    assert journal.ids() == []


class HeldJournal(RunningJournal):
    """A running journal whose writes wait (in their thread) until ``go`` is set."""

    def __init__(self, state_dir: Path) -> None:
        super().__init__(state_dir)
        self.go = threading.Event()
        self.writing = threading.Event()

    def add(self, task_id: str, attempt: int) -> None:
        self.writing.set()
        assert self.go.wait(WRITE_WAIT_S)
        super().add(task_id, attempt)


async def test_a_record_removed_before_its_write_starts_is_never_written(tmp_path: Path) -> None:
    journal = RunningJournal(tmp_path)
    record = JournalRecord(journal, "tsk_quick", 1)
    record.start_soon()  # the runner's first card
    record.remove()  # the result, spooled before the write began
    await asyncio.sleep(0)  # the loop turn the write would have started in
    await record.written()
    assert journal.ids() == []


async def test_a_record_removed_while_it_is_written_is_removed_after_the_write(tmp_path: Path) -> None:
    journal = HeldJournal(tmp_path)
    record = JournalRecord(journal, "tsk_forced", 1)
    record.start_soon()
    async with asyncio.timeout(WRITE_WAIT_S):
        while not journal.writing.is_set():
            await asyncio.sleep(0.001)  # the write's thread is on its way
    record.remove()  # a forced shutdown spools the task while the write still runs
    assert journal.ids() == []
    journal.go.set()
    await asyncio.wait_for(record.written(), WRITE_WAIT_S)
    await asyncio.sleep(0)  # the write's done-callback, which removes it
    assert journal.ids() == []


async def test_the_runner_s_wait_writes_the_record_when_nothing_started_it(tmp_path: Path) -> None:
    journal = RunningJournal(tmp_path)
    await JournalRecord(journal, "tsk_direct", 2).written()
    assert journal.ids() == ["tsk_direct"]
