"""The card's bounds on the real codex binary.

A plan far bigger than any server takes: the daemon runs a real ``codex app-server``
driven by the scripted model and reports to the real local control plane, which
refuses bodies over 8 MiB (``MAX_BODY_BYTES``) as a Boss server may. A 40,000-step
``update_plan`` made a 10 MB card that the server answered with 413, and the result
was dropped; the card's caps keep it under 256 KiB.

A 100,000-notification turn: real codex records one turn with a plan, commands and a
patch that each ask for approval; its messages, replayed with fresh ids and paths
through the reducer, make a turn of 100,000 notifications (real codex would need
tens of thousands of model round trips for it).
"""

from __future__ import annotations

import asyncio
import copy
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from boss_agent.controlplane import ControlPlane
from boss_agent.controlplane.server import MAX_BODY_BYTES
from boss_agent.daemon.runtime import Daemon
from boss_agent.demo import scripted_model as sm
from boss_agent.progress import bounds
from boss_agent.progress.bounds import CARD_MAX_BYTES, MAX_STEPS, wire_size
from boss_agent.progress.card import new_card
from boss_agent.progress.reducer import reduce
from boss_agent.sources.boss.pairing import pair_device
from boss_agent.sources.boss.retry import BossApiRetry
from tests.support.config import make_config
from tests.support.daemon import WAIT_S
from tests.support.codex_raw import RawCodex
from tests.support.waits import eventually

pytestmark = pytest.mark.codex
FAST = BossApiRetry.fast()
PLAN_STEPS = 40_000
TITLE = "x" * 220  # with its number, a 40,000-step plan is over 10 MB of card
TASK_TIMEOUT_S = 60  # the turn takes a few seconds here; under the test timeout, with room for a loaded box


def _finished(cp: ControlPlane, task_id: str) -> dict[str, Any] | None:
    view = cp.task(task_id)
    return view if view["status"] in ("completed", "failed", "cancelled") else None


async def test_a_40000_step_plan_reaches_a_server_that_refuses_8_mib_with_a_bounded_card(
    tmp_path: Path, codex_bin: str, codex_home: Path, workdir: Path, scripted_model: sm.ScriptedModel,
) -> None:
    assert MAX_BODY_BYTES == 8 * 1024 * 1024
    plan = [(f"step {i} {TITLE}", "completed" if i < 39_000 else "pending") for i in range(PLAN_STEPS)]
    plan[39_000] = (plan[39_000][0], "in_progress")
    scripted_model.enqueue(sm.turn(sm.update_plan(plan)), sm.turn(sm.message("Planned it all.")))
    async with ControlPlane(tmp_path / "cp" / "boss.db") as cp:
        config = make_config(tmp_path, server_url=cp.url, workspace=tmp_path, codex__bin=codex_bin)
        await pair_device(config.state_dir, cp.url, cp.create_pairing_code(), policy=FAST)
        daemon = Daemon(config, codex_home=codex_home, env={"CODEX_HOME": str(codex_home)},
                        retry_policy=FAST, claim_wait_ms=300, handle_signals=False)
        ready = asyncio.Event()
        async with asyncio.TaskGroup() as tg:
            job = tg.create_task(daemon.run(ready))
            await asyncio.wait_for(ready.wait(), 60)
            task_id = cp.submit_task("plan a lot", workdir=str(workdir))
            view = await eventually(lambda: _finished(cp, task_id), TASK_TIMEOUT_S)
            daemon.request_stop()
            await asyncio.wait_for(job, WAIT_S)
    assert view["result"]["status"] == "completed", view["result"]
    assert view["result"]["resultText"] == "Planned it all."
    card = view["executionProgress"]
    assert card["status"] == "completed"
    assert wire_size(card) < CARD_MAX_BYTES, wire_size(card)
    assert len(card["steps"]) == MAX_STEPS and card["omitted"]["steps"] == PLAN_STEPS - MAX_STEPS
    # The unresolved steps win over the 39,000 completed ones: the one in progress
    # (completed with the task), then the newest of the 999 pending ones.
    titles = [s["title"].split(" ")[1] for s in card["steps"]]
    assert titles == ["39000", *(str(i) for i in range(39_801, 40_000))]
    assert card["steps"][0]["status"] == "completed"
    assert {s["status"] for s in card["steps"][1:]} == {"pending"}


NOTIFICATIONS = 100_000
FIRST = 1_000
CHECK_EVERY = 10_000  # a card that grows shows it long before the end
PATCH_FILES = 30
COMMANDS_PER_PATCH = 7  # with these, the first 1,000 notifications fill every capped list
# Messages of the list-feeding kinds: items, approval requests and their resolution.
KEPT_ITEMS = ("commandExecution", "fileChange")
SIZE_SLACK = 1.01  # the same size, but for the digits of later approval ids ("approval-24801")


def _record_turn(codex_bin: str, codex_home: Path, workdir: Path,
                 model: sm.ScriptedModel) -> list[dict[str, Any]]:
    patch = "*** Begin Patch\n" + "".join(f"*** Add File: gen-{i}.txt\n+line {i}\n"
                                           for i in range(PATCH_FILES)) + "*** End Patch\n"
    model.enqueue(
        sm.turn(sm.update_plan([(f"step {i}", "pending") for i in range(MAX_STEPS + 50)])),
        sm.turn(sm.shell_call("true", workdir=str(workdir))),
        sm.turn(sm.apply_patch(patch)),
        sm.turn(sm.message("Done.")))
    codex = RawCodex(codex_bin, codex_home, workdir).start()
    try:
        thread = codex.start_thread(workdir, approvalPolicy="untrusted")
        return codex.run_turn(thread, "plan, run, patch")
    finally:
        codex.close()


def _by_item(transcript: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The messages of the first ``kind`` item: started, its request, resolved, completed."""
    items = [m for m in transcript if m["method"] == "item/started" and m["params"]["item"]["type"] == kind]
    item_id = items[0]["params"]["item"]["id"]
    requests = {m["id"] for m in transcript if "id" in m and m["params"].get("itemId") == item_id}
    return [m for m in transcript
            if (m["params"].get("item") or {}).get("id") == item_id or m.get("id") in requests
            or (m["method"] == "serverRequest/resolved" and m["params"].get("requestId") in requests)]


def _fresh(messages: list[dict[str, Any]], copy_no: int) -> list[dict[str, Any]]:
    """``messages`` with every id and file name made this copy's own (fixed width, so a
    later copy's names are no longer than an earlier one's)."""
    tag = f"r{copy_no:06d}"
    out = []
    for message in copy.deepcopy(messages):
        params = message["params"]
        if "id" in message:
            message["id"] = f"{tag}-{message['id']}"
        for key in ("itemId", "requestId"):
            if key in params:
                params[key] = f"{tag}-{params[key]}"
        item = params.get("item")
        if isinstance(item, dict):
            item["id"] = f"{tag}-{item['id']}"
            for change in item.get("changes") or ():
                head, _, name = change["path"].rpartition("/")
                change["path"] = f"{head}/{tag}-{name}"
        out.append(message)
    return out


def _replayed(transcript: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    start = next(m for m in transcript if m["method"] == "turn/started")
    plan = next(m for m in transcript if m["method"] == "turn/plan/updated")
    command, patch = _by_item(transcript, "commandExecution"), _by_item(transcript, "fileChange")
    yield start
    yield plan
    for copy_no in itertools.count():
        for n in range(COMMANDS_PER_PATCH):
            yield from _fresh(command, copy_no * COMMANDS_PER_PATCH + n)
        yield from _fresh(patch, copy_no)


def test_a_100000_notification_turn_has_the_card_size_of_a_1000_one(
    codex_bin: str, codex_home: Path, workdir: Path, scripted_model: sm.ScriptedModel,
) -> None:
    transcript = _record_turn(codex_bin, codex_home, workdir, scripted_model)
    assert len(_by_item(transcript, "commandExecution")) == 4  # started, request, resolved, completed
    card = new_card(workdir=str(workdir), now="2026-11-30T00:00:00Z")
    first = 0
    for count, message in enumerate(itertools.islice(_replayed(transcript), NOTIFICATIONS), 1):
        card = reduce(card, message)
        if count == FIRST:
            at_first = card.to_dict()
            first = wire_size(at_first)
            for name, cap in (("approvals", bounds.MAX_APPROVALS), ("toolActivities", bounds.MAX_TOOL_ACTIVITIES),
                              ("fileChanges", bounds.MAX_FILE_CHANGES), ("steps", MAX_STEPS)):
                assert len(at_first[name]) == cap, name  # every capped list is full at 1,000
        elif count % CHECK_EVERY == 0:
            assert wire_size(card.to_dict()) <= first * SIZE_SLACK, count
    out = card.to_dict()
    assert first <= wire_size(out) <= first * SIZE_SLACK < CARD_MAX_BYTES
    approvals = out["approvals"]
    assert len(approvals) == bounds.MAX_APPROVALS and approvals[0]["status"] == "accepted"
    units = (NOTIFICATIONS - 2) // ((COMMANDS_PER_PATCH + 1) * 4)  # whole blocks replayed
    assert out["omitted"]["approvals"] + len(approvals) >= units * (COMMANDS_PER_PATCH + 1)
    assert out["omitted"]["fileChanges"] + len(out["fileChanges"]) >= units * PATCH_FILES
    assert out["omitted"]["steps"] == 50
