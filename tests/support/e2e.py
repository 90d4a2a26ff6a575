"""Shared by the end-to-end tests: a real ``boss-agent up --demo`` process, run as a user runs it.

``UpProcess`` starts ``python -m boss_agent up --demo --port 0`` with its own state dir,
workspace root and ``HOME`` under a tmp dir (nothing touches the real home or the
user's codex), reads the page URL from its stdout, and stops it with SIGTERM. Its
stdout and stderr are drained by reader threads, so the child never blocks on a full
pipe and a test can search everything it printed. ``run_cli`` runs one more
``boss-agent`` command against the same state dir; ``first_task`` waits, on the
control plane's live event stream, for a task view that matches a condition.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import httpx

from boss_agent.controlplane.security import SECRET_FILE, URL_FILE
from tests.support.cli import cli_env, run_cli_async

REPO = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 60  # up starts the control plane, pairs, starts codex and claims: seconds, slow on a busy box
EVENT_TIMEOUT_S = 60  # from a submit to codex's approval request: seconds; bounded well below the test timeout
STOP_TIMEOUT_S = 45  # the daemon's grace period is 30 s for running tasks; an idle one stops in about a second
CLI_TIMEOUT_S = 90  # a followed demo task: codex's turn with one approval, a few seconds normally
READY_BANNER = "boss-agent is up. Open the web page:"
# Planted in the prompts: neither may reach a log line or the card. The secret-shaped one
# would also be masked by the sanitizer; the plain word shows the prompt itself never went out.
CANARY = "sk-proj-CANARYe2eSecret0123456789abcdefXYZ"
PROMPT_WORD = "quokkalighthouse"


class _Collector:
    """Reads a pipe line by line on a thread; ``wait_for`` blocks until a line matches."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def wait_for(self, needle: str, timeout_s: float) -> int | None:
        """The index of the first line containing ``needle``; None on timeout or end of stream."""
        def found() -> int | None:
            return next((i for i, line in enumerate(self.lines) if needle in line), None)

        with self._changed:
            self._changed.wait_for(lambda: found() is not None or self._closed, timeout_s)
            return found()

    def text(self) -> str:
        self._thread.join(STOP_TIMEOUT_S)  # after the process ended: everything it wrote
        with self._changed:
            return "".join(self.lines)


class UpProcess:
    """``boss-agent up --demo --port 0`` in a subprocess, with everything under ``root``."""

    def __init__(self, root: Path, codex_bin: str) -> None:
        self.root = root
        self.state_dir = root / "state"
        self.workspaces = root / "workspaces"
        self.home = root / "home"
        for path in (self.state_dir, self.workspaces, self.home):
            path.mkdir(parents=True, exist_ok=True)
        self.env = cli_env(self.home, BOSS_STATE_DIR=str(self.state_dir), BOSS_WORKSPACES=str(self.workspaces),
                           BOSS_CODEX_BIN=codex_bin)
        self.proc: subprocess.Popen[str] | None = None
        self.page_url = ""

    @property
    def log_file(self) -> Path:
        return self.state_dir / "logs" / "boss-agent.log"

    @property
    def controlplane_dir(self) -> Path:
        return self.state_dir / "controlplane"

    def project(self, name: str) -> Path:
        path = self.workspaces / name
        path.mkdir()
        return path

    def start(self) -> str:
        """Start ``up`` and return the page URL it prints once the daemon claims."""
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "boss_agent", "up", "--demo", "--port", "0"], cwd=self.root, env=self.env,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.stdout = _Collector(self.proc.stdout)
        self.stderr = _Collector(self.proc.stderr)
        banner = self.stdout.wait_for(READY_BANNER, READY_TIMEOUT_S)
        if banner is None:
            self.stop()
            raise AssertionError(f"up printed no page URL; stderr:\n{self.stderr.text()[-3000:]}")
        url = self.stdout.wait_for("?token=", READY_TIMEOUT_S)
        assert url == banner + 1, "the URL follows the banner on the next line"
        self.page_url = self.stdout.lines[url].strip()
        return self.page_url

    def stop(self) -> int:
        """SIGTERM, then the exit code within ``STOP_TIMEOUT_S`` (killed and an error after that)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"up did not exit within {STOP_TIMEOUT_S} s of SIGTERM") from None

    def credentials(self) -> dict[str, str]:
        """The control plane's secret (the page URL's token) and the device's token."""
        return {"controlplane secret": (self.controlplane_dir / SECRET_FILE).read_text(encoding="utf-8").strip(),
                "device token": (self.state_dir / "device_token").read_text(encoding="utf-8").strip()}

    def logged(self) -> str:
        """What it wrote to stderr and its log file; call after ``stop``."""
        log = self.log_file.read_text(encoding="utf-8") if self.log_file.exists() else ""
        return self.stderr.text() + log

    def everything_written(self) -> str:
        """All it printed and logged; call after ``stop``."""
        return self.stdout.text() + self.logged()

    async def run_cli(self, *args: str, timeout_s: float = CLI_TIMEOUT_S) -> tuple[int, str, str]:
        """``boss-agent ARGS`` against this state dir, stdin not a terminal: (exit code, stdout, stderr)."""
        try:
            done = await run_cli_async(*args, env=self.env, cwd=self.root, timeout=timeout_s)
        except TimeoutError:
            raise AssertionError(f"boss-agent {args[0]} did not exit within {timeout_s} s") from None
        return done.returncode, done.stdout, done.stderr


@contextlib.contextmanager
def running_up(root: Path, codex_bin: str) -> Iterator[UpProcess]:
    """An ``UpProcess`` under ``root``, started; stopped afterwards unless a test stopped it."""
    process = UpProcess(root, codex_bin)
    process.start()
    try:
        yield process
    finally:
        if process.proc is not None and process.proc.poll() is None:
            process.stop()


async def first_task(controlplane_dir: Path, matches: Callable[[dict[str, Any]], bool],
                     timeout_s: float = EVENT_TIMEOUT_S) -> dict[str, Any]:
    """The first task view (the snapshot's, then each live ``task`` event) for which ``matches``."""
    url = (controlplane_dir / URL_FILE).read_text(encoding="utf-8").strip()
    secret = (controlplane_dir / SECRET_FILE).read_text(encoding="utf-8").strip()
    async with (asyncio.timeout(timeout_s),
                httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {secret}"}, timeout=None) as http,
                http.stream("GET", "/api/local/events") as stream):
        assert stream.status_code == 200
        kind = None
        async for line in stream.aiter_lines():
            if line.startswith("event:"):
                kind = line.removeprefix("event:").strip()
            elif line.startswith("data:"):
                payload = json.loads(line.removeprefix("data:"))
                views = payload["tasks"] if kind == "snapshot" else [payload] if kind == "task" else []
                for view in views:
                    if matches(view):
                        found: dict[str, Any] = view
                        return found
    raise AssertionError("the control plane closed its event stream")


def pending_approval(view: dict[str, Any]) -> dict[str, Any] | None:
    return next((a for a in view.get("approvals", []) if a["status"] == "pending"), None)
