"""Shared by the soak and chaos tests: a daemon process, a turn-counting model, figures.

``TurnCounter`` is the scripted model's responder: every task's prompt carries a tag
(``job-17``), and the counter answers ``done job-17`` and counts the model requests
per tag, so a turn started twice shows as a count of 2. ``DaemonProcess`` runs
``python -m boss_agent run`` against the given control plane with its own state dir,
workspace and codex home, and can be SIGKILLed (with its codex child) and restarted.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import psutil

from boss_agent.demo import scripted_model as sm
from tests.conftest import REPO
from tests.support.cli import isolated

TAG = re.compile(r"\bjob-\d+\b")
EXIT_S = 30.0  # a SIGTERMed daemon with nothing running stops in about a second
START_MARK = "=== daemon start"  # written into daemon.log before each start
FINISHED = re.compile(r"^task (\S+) finished: completed$")


class TurnCounter:
    """A scripted-model responder that answers each task and counts its turns."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.turns: Counter[str] = Counter()
        self.delay_s = delay_s  # between streamed events: turns long enough to be hit by a kill
        self._lock = threading.Lock()

    def __call__(self, request: sm.RecordedRequest) -> sm.Response:
        tags = [m.group() for text in request.input_texts() for m in TAG.finditer(text)]
        tag = tags[-1] if tags else "untagged"
        with self._lock:
            self.turns[tag] += 1
        return sm.turn(sm.message(f"done {tag}"), delay_s=self.delay_s)

    def rerun(self) -> list[str]:
        with self._lock:
            return sorted(tag for tag, count in self.turns.items() if count > 1)


class DaemonProcess:
    """``boss-agent run`` as a user's service runs it, against ``server_url``."""

    def __init__(self, root: Path, server_url: str, codex_bin: str, codex_home: Path,
                 **env: str) -> None:
        self.root = root
        self.state_dir = root / "state"
        self.env = isolated(root, BOSS_SERVER_URL=server_url, BOSS_CODEX_BIN=codex_bin,
                            BOSS_WORKSPACES=str(root), CODEX_HOME=str(codex_home), BOSS_GRACE_PERIOD_S="0", **env)
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        log = (self.root / "daemon.log").open("ab")
        log.write(f"{START_MARK} {self.starts + 1}\n".encode())
        log.flush()
        self.proc = subprocess.Popen([sys.executable, "-m", "boss_agent", "--debug", "run"], cwd=REPO,
                                     env=self.env, stdout=log, stderr=log)
        self.starts += 1

    @property
    def ps(self) -> psutil.Process:
        assert self.proc is not None
        return psutil.Process(self.proc.pid)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def codex_children(self) -> list[psutil.Process]:
        try:
            return [c for c in self.ps.children(recursive=True) if "codex" in " ".join(c.cmdline())]
        except psutil.Error:
            return []

    def kill(self) -> None:
        """SIGKILL the daemon, then its codex child (which lives in its own session)."""
        assert self.proc is not None
        children = self.ps.children(recursive=True)
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(EXIT_S)
        for child in children:
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def stop(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(EXIT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("the daemon did not stop within its bound") from None

    def log(self) -> str:
        return (self.root / "daemon.log").read_text(errors="replace")

    def durably_completed(self) -> set[str]:
        """Task ids the daemon finished ``completed`` and then lived on to log again.

        The result is spooled right after that log line, with no await in between, so
        any later line of the same process proves the result was on disk (a kill
        before that is allowed to turn it into ``agent_restarted``).
        """
        found: set[str] = set()
        for incarnation in self.log().split(START_MARK)[1:]:
            messages = [_message(line) for line in incarnation.splitlines()]
            for index, message in enumerate(messages):
                match = FINISHED.match(message)
                if match and any(messages[index + 1:]):
                    found.add(match.group(1))
        return found


def _message(line: str) -> str:
    try:
        record = json.loads(line)
    except ValueError:
        return ""
    return str(record.get("msg", "")) if isinstance(record, dict) else ""
