"""One `codex app-server` child process: spawn, drain stderr, stop as a process group.

The child runs in its own session (its own process group) because the npm wrapper
stays as a parent of the native binary, and commands codex starts keep running after
``turn/interrupt`` (codex does not end them): only killing the whole group stops
all of them.
stderr is read continuously, so the child can never block on a full pipe, and every
line goes to our log through the sanitizer, at debug level (it quotes paths and ids).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
from collections.abc import Sequence
from pathlib import Path

from boss_agent.codexbin import child_environment, find_codex, resolve_native
from boss_agent.errors import AppServerUnavailable
from boss_agent.redact import sanitize_text

logger = logging.getLogger(__name__)

# A JSON-RPC line can carry a whole thread history (thread/resume); asyncio's 64 KiB
# default would fail those reads.
STDOUT_LINE_LIMIT = 64 * 1024 * 1024
# After stdin closes codex exits on its own within milliseconds; past this we signal.
EXIT_GRACE_S = 2.0
# SIGTERM gives the wrapper a chance to forward to the native child before SIGKILL.
TERM_GRACE_S = 1.0
STDERR_LOG_CHARS = 300  # a log line is a summary


class ChildProcess:
    """A started `codex app-server` and the handles to its pipes."""

    def __init__(self, proc: asyncio.subprocess.Process, label: str) -> None:
        self.proc = proc
        self.label = label
        self.stderr_lines = 0

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc.returncode is None

    async def _stderr_line(self) -> str | None:
        """The next stderr line (logged sanitized at debug level), or None at EOF."""
        stream = self.proc.stderr
        if stream is None:
            return None
        while True:
            try:
                line = await stream.readline()
            except ValueError:  # an over-long line: asyncio dropped it; keep reading
                continue
            if not line:
                return None
            self.stderr_lines += 1
            text = line.decode("utf-8", "replace").rstrip()
            if logger.isEnabledFor(logging.DEBUG):  # sanitizing costs; skip it when unlogged
                logger.debug("%s stderr: %s", self.label, sanitize_text(text, limit=STDERR_LOG_CHARS))
            return text

    async def drain_stderr(self) -> None:
        """Read stderr until EOF, logging each line sanitized at debug level."""
        while await self._stderr_line() is not None:
            pass

    async def stderr_match(self, pattern: re.Pattern[str]) -> re.Match[str]:
        """Read stderr until a line matches ``pattern`` (``drain_stderr`` reads the rest)."""
        while (text := await self._stderr_line()) is not None:
            if match := pattern.search(text):
                return match
        raise AppServerUnavailable(f"{self.label} exited (code {await self.proc.wait()}) before it was ready")

    def kill_group(self, sig: int = signal.SIGKILL) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass  # already gone (a reaped group id is never reused while we hold the child)

    async def stop(self) -> None:
        """Close stdin, then TERM, then KILL the group; bounded by the grace constants."""
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.close()
        for sig, grace in ((None, EXIT_GRACE_S), (signal.SIGTERM, TERM_GRACE_S),
                           (signal.SIGKILL, None)):
            if sig is not None:
                self.kill_group(sig)
            try:
                await asyncio.wait_for(self.proc.wait(), grace)
                break
            except TimeoutError:
                continue
        # Even after the leader exited, its commands may live on in the group.
        self.kill_group(signal.SIGKILL)


async def spawn_app_server(
    codex_bin: str | None,
    *,
    codex_home: Path | None,
    cwd: Path,
    extra_args: Sequence[str] = (),
    label: str = "codex app-server",
    pipe_stdout: bool = True,
) -> ChildProcess:
    """Start `codex app-server [extra_args]` in its own process group.

    stdin is always a pipe (closing it asks codex to exit); stdout is a pipe for the
    stdio transport and discarded for a WebSocket listener, which nobody reads.
    """
    binary = resolve_native(find_codex(codex_bin))
    extra_env = dict(binary.env)
    if codex_home is not None:
        extra_env["CODEX_HOME"] = str(codex_home)
    try:
        proc = await asyncio.create_subprocess_exec(
            *binary.argv, "app-server", *extra_args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE if pipe_stdout else asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE, cwd=cwd, env=child_environment(extra_env),
            start_new_session=True, limit=STDOUT_LINE_LIMIT,
        )
    except OSError as exc:
        raise AppServerUnavailable(f"cannot start codex app-server: {exc.strerror}") from exc
    logger.debug("%s started (pid %s)", label, proc.pid)
    return ChildProcess(proc, label)
