"""A tiny daemon for tests/peers/process/test_lifecycle_process.py (not a test module itself).

It wires the lifecycle pieces the way the real daemon does: the instance lock,
the shutdown controller, READY/STOPPING/WATCHDOG to $NOTIFY_SOCKET, and one fake
"task" that ends as ``cancelled`` when ``force_cancel`` is set, or ``completed``
after ``--task-seconds`` (or, with ``--finish-on-stop``, right after the stop signal,
like work that wraps up within the grace period). Every event is one JSON line on
stdout; a refused start prints ``error: …`` on stderr and exits 1.

    python -m tests.support.lifecycle_prog STATE_DIR --grace S --task-seconds S [--finish-on-stop]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

from boss_agent.errors import AlreadyRunning
from boss_agent.daemon.process import READY, STOPPING, InstanceLock, ShutdownController, Watchdog, sd_notify

WRAP_UP_S = 0.05  # the fake task's "last bit of work" after the stop signal


def emit(event: str, **fields: object) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


async def fake_task(shutdown: ShutdownController, seconds: float, finish_on_stop: bool) -> str:
    if finish_on_stop:
        await shutdown.stopping.wait()
        seconds = WRAP_UP_S
    try:
        await asyncio.wait_for(shutdown.force_cancel.wait(), timeout=seconds)
    except TimeoutError:
        return "completed"
    return "cancelled"


async def watch_reload(shutdown: ShutdownController) -> None:
    while True:
        await shutdown.reload.wait()
        shutdown.reload.clear()
        emit("reload")


async def main(args: argparse.Namespace) -> None:
    with InstanceLock(Path(args.state_dir)), ShutdownController(args.grace) as shutdown:
        stop_watchdog = asyncio.Event()
        async with asyncio.TaskGroup() as group:
            group.create_task(Watchdog.from_env().run(lambda: True, stop_watchdog))
            reloads = group.create_task(watch_reload(shutdown))
            task = group.create_task(fake_task(shutdown, args.task_seconds, args.finish_on_stop))
            sd_notify(READY)
            emit("ready", pid=os.getpid())
            await shutdown.stopping.wait()
            sd_notify(STOPPING)
            emit("stopping", reason=shutdown.stop_reason)
            emit("task", outcome=await task)
            stop_watchdog.set()
            reloads.cancel()
    emit("exit")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("state_dir")
    parser.add_argument("--grace", type=float, required=True)
    parser.add_argument("--task-seconds", type=float, required=True)
    parser.add_argument("--finish-on-stop", action="store_true")
    try:
        asyncio.run(main(parser.parse_args()))
    except AlreadyRunning as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
