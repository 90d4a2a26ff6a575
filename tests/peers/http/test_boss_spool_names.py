"""Spool and journal records are named by a hash of the task id, so no id (long,
non-ASCII, path-like) can make a file name the file system refuses; records spooled
under the old ``quote(taskId).json`` names are still recovered."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

from boss_agent.controlplane import ControlPlane
from boss_agent.sources.boss.pairing import pair_device
from boss_agent.sources.boss.spool import CompletionSpool, RunningJournal
from boss_agent.tasks import TaskResult
from tests.support.config import make_config
from tests.support.daemon import FAST, FaultProxy, StubRunner, finished, running, spool_empty

LONG_ID = "tsk_" + "é" * 120  # quote() makes 724 characters of it: over NAME_MAX


def test_a_long_non_ascii_task_id_is_spooled_and_journaled(tmp_path: Path) -> None:
    spool, journal = CompletionSpool(tmp_path), RunningJournal(tmp_path)
    journal.add(LONG_ID, 1)
    spool.put_result(LONG_ID, TaskResult(status="completed", result_text="kept"))
    assert LONG_ID in spool and journal.ids() == [LONG_ID]
    assert CompletionSpool(tmp_path).pending() == [(LONG_ID, spool.pending()[0][1])]
    assert spool.pending()[0][1]["resultText"] == "kept"
    assert all(len(p.name) < 100 for p in (tmp_path / "spool").iterdir())
    journal.remove(LONG_ID)
    spool.remove(LONG_ID)
    assert LONG_ID not in spool and len(spool) == 0 and journal.ids() == []


def test_records_under_the_old_names_are_still_recovered(tmp_path: Path) -> None:
    (tmp_path / "spool").mkdir()
    (tmp_path / "running").mkdir()
    old_body = TaskResult(status="completed", result_text="from an old version").to_wire()
    (tmp_path / "spool" / f"{quote('tsk/1', safe='')}.json").write_text(json.dumps(old_body))
    (tmp_path / "running" / "tsk_2.json").write_text(json.dumps({"taskId": "tsk_2", "attempt": 1}))
    spool = CompletionSpool(tmp_path)
    assert "tsk/1" in spool
    assert RunningJournal(tmp_path).recover(spool) == ["tsk_2"]
    bodies = dict(spool.pending())
    assert bodies["tsk/1"]["resultText"] == "from an old version"
    assert bodies["tsk_2"]["error"]["code"] == "agent_restarted"
    spool.remove("tsk/1")
    assert "tsk/1" not in spool and [t for t, _ in spool.pending()] == ["tsk_2"]


async def test_a_long_non_ascii_task_id_completes_end_to_end(tmp_path: Path) -> None:
    async with ControlPlane(tmp_path / "cp" / "boss.db") as cp, FaultProxy(cp.url) as proxy:
        config = make_config(tmp_path, server_url=proxy.url, workspace=tmp_path)
        await pair_device(config.state_dir, proxy.url, cp.create_pairing_code(), policy=FAST)
        queued = cp.submit_task("long id")
        # The control plane makes short ids; the device API allows 200 characters of any kind.
        cp.core.queue.db.conn.execute("UPDATE tasks SET task_id = ? WHERE task_id = ?",
                                      (LONG_ID, queued))
        runner = StubRunner(cards=1)
        async with running(config, runner) as daemon:
            task = await finished(cp, proxy, LONG_ID)
            await spool_empty(daemon)
    assert runner.runs == [LONG_ID]
    assert task["status"] == "completed" and task["result"]["resultText"] == "done: long id"
