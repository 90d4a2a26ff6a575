"""The lifecycle pieces in a real process: signals, the grace period, the lock, sd_notify.

``tests/support/lifecycle_prog.py`` is a tiny daemon built from InstanceLock,
ShutdownController, Watchdog and sd_notify around one fake task. Each test starts it
as a real subprocess with ``NOTIFY_SOCKET`` pointing at a real unix datagram socket
in a temp dir (standing in for systemd's), and sends it real signals.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from boss_agent.daemon.statefile import daemon_running

from tests.support.notify_socket import NotifySocket

REPO = Path(__file__).resolve().parents[3]
EVENT_TIMEOUT_S = 30  # generous: two cores shared with other test runs
LONG_S = 600  # a grace period or task length no test waits out


class Prog:
    """tests/support/lifecycle_prog.py as a subprocess, its stdout events in a queue."""

    def __init__(self, state_dir: Path, notify: NotifySocket, *args: str) -> None:
        env = {**os.environ, "NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "100000",
               "PYTHONPATH": str(REPO)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.lifecycle_prog", str(state_dir), *args],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.events: queue.Queue[dict] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with self.proc.stdout:
            for line in self.proc.stdout:
                try:
                    self.events.put(json.loads(line))
                except ValueError:
                    self.events.put({"event": "unparsable", "line": line})

    def next_event(self) -> dict:
        return self.events.get(timeout=EVENT_TIMEOUT_S)

    def expect(self, name: str) -> dict:
        event = self.next_event()
        assert event["event"] == name, event
        return event

    def signal(self, sig: signal.Signals) -> None:
        self.proc.send_signal(sig)

    def finish(self) -> tuple[int, str]:
        # Not communicate(): the reader thread owns stdout.
        code = self.proc.wait(timeout=EVENT_TIMEOUT_S)
        assert self.proc.stderr is not None
        return code, self.proc.stderr.read()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=EVENT_TIMEOUT_S)
        assert self.proc.stderr is not None
        self.proc.stderr.close()


@pytest.fixture
def start(tmp_path: Path, notify: NotifySocket) -> Iterator:
    started: list[Prog] = []

    def run(*args: str) -> Prog:
        prog = Prog(tmp_path / "state", notify, *args)
        started.append(prog)
        return prog

    yield run
    for prog in started:
        prog.kill()


def test_sigterm_lets_the_running_task_finish_within_the_grace_period_and_exits_cleanly(start, notify):
    prog = start("--grace", str(LONG_S), "--task-seconds", str(LONG_S), "--finish-on-stop")
    prog.expect("ready")
    notify.wait_for("READY=1")
    prog.signal(signal.SIGTERM)
    assert prog.expect("stopping")["reason"] == "SIGTERM"
    assert prog.expect("task")["outcome"] == "completed"
    prog.expect("exit")
    assert prog.finish()[0] == 0
    assert "STOPPING=1" in notify.wait_for("STOPPING=1")


def test_a_task_still_running_when_the_grace_period_ends_is_interrupted(start):
    prog = start("--grace", "0.2", "--task-seconds", str(LONG_S))
    prog.expect("ready")
    prog.signal(signal.SIGTERM)
    prog.expect("stopping")
    assert prog.expect("task")["outcome"] == "cancelled"
    prog.expect("exit")
    assert prog.finish()[0] == 0


def test_a_second_signal_interrupts_running_tasks_at_once(start):
    prog = start("--grace", str(LONG_S), "--task-seconds", str(LONG_S))
    prog.expect("ready")
    prog.signal(signal.SIGINT)
    assert prog.expect("stopping")["reason"] == "SIGINT"
    prog.signal(signal.SIGTERM)
    assert prog.expect("task")["outcome"] == "cancelled"
    assert prog.finish()[0] == 0


def test_sighup_asks_for_a_reload_and_the_daemon_keeps_running(start):
    prog = start("--grace", str(LONG_S), "--task-seconds", str(LONG_S), "--finish-on-stop")
    prog.expect("ready")
    prog.signal(signal.SIGHUP)
    prog.expect("reload")
    prog.signal(signal.SIGHUP)
    prog.expect("reload")
    prog.signal(signal.SIGTERM)
    prog.expect("stopping")
    assert prog.expect("task")["outcome"] == "completed"
    assert prog.finish()[0] == 0


def test_the_daemon_sends_ready_then_watchdog_pings_to_notify_socket(start, notify):
    prog = start("--grace", str(LONG_S), "--task-seconds", str(LONG_S), "--finish-on-stop")
    prog.expect("ready")
    seen = notify.wait_for("READY=1")
    assert "WATCHDOG=1" in notify.wait_for("WATCHDOG=1")
    assert all(message in ("READY=1", "WATCHDOG=1") for message in seen)
    prog.signal(signal.SIGTERM)
    assert prog.finish()[0] == 0


def test_a_second_instance_on_the_same_state_dir_is_refused_naming_the_running_pid(start, tmp_path):
    first = start("--grace", str(LONG_S), "--task-seconds", str(LONG_S), "--finish-on-stop")
    pid = first.expect("ready")["pid"]
    assert daemon_running(tmp_path / "state") == pid
    second = start("--grace", "1", "--task-seconds", "1")
    code, stderr = second.finish()
    assert code == 1
    assert f"already running (pid {pid})" in stderr
    first.signal(signal.SIGTERM)
    assert first.finish()[0] == 0
    assert daemon_running(tmp_path / "state") is None
