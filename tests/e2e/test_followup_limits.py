"""A follow-up runs under the owner's limits of now, whichever source sends it
(device API §3, the follow-up bullet): a real daemon on real codex, its config file
rewritten and a real SIGHUP between the turns of one thread.

The thread begins with full access in ``ws/a``. The owner then narrows the device to
``ws/b`` and workspace-write: a follow-up naming no folder is refused (its thread's
folder is no workspace any more), and one naming ``ws/b`` and asking for full access
runs in ``ws/b`` under workspace-write. Last the owner caps the sandbox at read-only:
the next follow-up, naming no folder, runs in ``ws/b`` (where its thread last ran) and
writes nothing. Through the Boss API and through the Redis gateway.
"""

from __future__ import annotations

import json
import os
import signal
import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest

from boss_agent.config import load_config
from boss_agent.controlplane import ControlPlane
from boss_agent.daemon.runtime import Daemon
from boss_agent.demo import scripted_model as sm
from boss_agent.sources.boss.pairing import pair_device
from boss_agent.sources.boss.retry import BossApiRetry
from tests.support.daemon import serving
from tests.support.gateway import AGENT, ask, read_events, record_of, sdk_client, sdk_redis

pytestmark = [pytest.mark.codex, pytest.mark.redis]

TURN_WAIT_S = 60.0  # a real codex turn on a loaded 2-core machine, with slack
RELOAD_WAIT_S = 10.0  # a reload reads one small file


@dataclass
class Outcome:
    status: str
    error: str | None
    thread: str | None
    card: dict[str, Any]


class Via(Protocol):
    async def run(self, prompt: str, **fields: Any) -> Outcome: ...


class ViaBoss:
    def __init__(self, cp: ControlPlane) -> None:
        self.cp = cp

    async def run(self, prompt: str, **fields: Any) -> Outcome:
        task_id = self.cp.submit_task(prompt, **fields)
        view = await self.cp.wait_task(task_id, lambda t: t["status"] in ("completed", "failed"), TURN_WAIT_S)
        result = view["result"]
        return Outcome(view["status"], (result.get("error") or {}).get("code"), result.get("codexThreadRef"),
                       view["executionProgress"])


class ViaGateway:
    def __init__(self, redis_url: str) -> None:
        self.redis = sdk_redis(redis_url)
        self.asked = 0

    async def run(self, prompt: str, **fields: Any) -> Outcome:
        self.asked += 1
        message_id = f"msg-{self.asked}"
        await ask(sdk_client(self.redis), "s-limits", prompt, message_id, extra_payload=fields)
        events = await read_events(self.redis, "s-limits", message_id, timeout=TURN_WAIT_S)
        record = await record_of(self.redis, "s-limits", message_id)
        cards = [json.loads(e.data["choices"][0]["delta"]["content"]) for e in events
                 if e.event_type == "reasoningLogDelta" and e.data["contentType"] == "2008"]
        error = record.get("error")
        error = json.loads(error) if isinstance(error, str) and error else error
        return Outcome(str(record["status"]).lower(), (error or {}).get("code"),
                       (events[-1].metadata or {}).get("codexThreadRef"), cards[-1] if cards else {})


def _write(path: Path, *, state: Path, server: str, redis_url: str, workspaces: list[Path],
           sandbox: str) -> None:
    roots = ", ".join(f'"{root}"' for root in workspaces)
    path.write_text(
        f'state_dir = "{state}"\nworkspaces = [{roots}]\ngrace_period_s = 0\n'
        f'[server]\nurl = "{server}"\n'
        f'[gateway]\nenabled = true\nredis_url = "{redis_url}"\nagent_types = ["{AGENT}"]\n'
        f'[codex]\napproval_policy = "never"\nmax_approval_policy = "never"\n'
        f'sandbox = "{sandbox}"\nmax_sandbox = "{sandbox}"\n')


async def _sighup(daemon: Daemon) -> None:
    daemon.reloaded.clear()
    os.kill(os.getpid(), signal.SIGHUP)  # the daemon's own handler, as `kill -HUP` reaches it
    await asyncio.wait_for(daemon.reloaded.wait(), RELOAD_WAIT_S)


def _sandbox_mode(request: sm.RecordedRequest) -> str:
    """The sandbox codex itself says the turn ran under (its turn metadata header)."""
    return str(json.loads(request.headers["x-codex-turn-metadata"])["sandbox_mode"])


@pytest.fixture
async def daemon_on(tmp_path: Path, codex_bin: str, codex_home: Path,
                    redis_server: Any) -> AsyncIterator[tuple[Daemon, ControlPlane, Path]]:
    """A daemon with the Boss source and the gateway, its config file at the yielded path
    (first: ``ws`` as the one workspace, full access)."""
    path, ws = tmp_path / "config.toml", tmp_path / "ws"
    ws.mkdir()
    async with ControlPlane(tmp_path / "cp" / "boss.db") as cp:
        _write(path, state=tmp_path / "state", server=cp.url, redis_url=redis_server.url,
               workspaces=[ws], sandbox="danger-full-access")
        config = load_config(path, environ={}, overrides={"codex.bin": codex_bin})
        policy = BossApiRetry.fast()
        await pair_device(config.state_dir, cp.url, cp.create_pairing_code(), policy=policy)
        daemon = Daemon(config, codex_home=codex_home, env={"CODEX_HOME": str(codex_home)},
                        retry_policy=policy, claim_wait_ms=300, handle_signals=True)
        async with serving(daemon):
            yield daemon, cp, path


@pytest.mark.parametrize("source", ["boss", "gateway"])
async def test_each_follow_up_runs_under_the_limits_the_owner_set_last(
        source: str, daemon_on: tuple[Daemon, ControlPlane, Path], scripted_model: sm.ScriptedModel,
        redis_server: Any, outside_tmp: Path, tmp_path: Path) -> None:
    daemon, cp, path = daemon_on
    via: Via = ViaBoss(cp) if source == "boss" else ViaGateway(redis_server.url)
    first_dir, second_dir = tmp_path / "ws" / "a", tmp_path / "ws" / "b"
    first_dir.mkdir()
    second_dir.mkdir()

    def narrow(sandbox: str) -> None:
        _write(path, state=tmp_path / "state", server=cp.url, redis_url=redis_server.url,
               workspaces=[second_dir], sandbox=sandbox)

    scripted_model.enqueue(sm.turn(sm.shell_call(f"touch first.txt {outside_tmp}/first.txt")),
                           sm.text_reply("first"))
    first = await via.run("first", workdir=str(first_dir))
    assert first.status == "completed" and first.thread, first
    assert (first_dir / "first.txt").exists() and (outside_tmp / "first.txt").exists()  # full access
    assert first.card["threadSettings"]["sandbox"] == "danger-full-access"

    narrow("workspace-write")
    await _sighup(daemon)
    asked = len(scripted_model.requests)
    unplaced = await via.run("where am I?", codexThreadRef=first.thread)
    assert (unplaced.status, unplaced.error) == ("failed", "workdir_not_allowed"), unplaced
    assert len(scripted_model.requests) == asked  # nothing ran

    scripted_model.enqueue(sm.turn(sm.shell_call(f"touch here.txt {outside_tmp}/second.txt")),
                           sm.text_reply("second"))
    moved = await via.run("second", codexThreadRef=first.thread, workdir=str(second_dir),
                          sandbox="danger-full-access")
    output = list(scripted_model.requests[-1].tool_outputs().values())[-1]
    assert moved.status == "completed" and moved.thread == first.thread, moved
    assert (second_dir / "here.txt").exists() and not (first_dir / "here.txt").exists(), output
    assert not (outside_tmp / "second.txt").exists(), output  # full access is gone
    assert _sandbox_mode(scripted_model.requests[-1]) == "workspace-write"
    assert moved.card["threadSettings"]["sandbox"] == "workspace-write"

    narrow("read-only")
    await _sighup(daemon)
    scripted_model.enqueue(sm.turn(sm.shell_call("pwd; touch third.txt")), sm.text_reply("third"))
    capped = await via.run("third", codexThreadRef=first.thread)
    output = list(scripted_model.requests[-1].tool_outputs().values())[-1]
    assert capped.status == "completed", capped
    assert str(second_dir) in output and "Read-only file system" in output, output
    assert not (second_dir / "third.txt").exists() and not (first_dir / "third.txt").exists()
    assert _sandbox_mode(scripted_model.requests[-1]) == "read-only"
    assert capped.card["threadSettings"]["sandbox"] == "read-only"
    assert daemon.reloads == 2
