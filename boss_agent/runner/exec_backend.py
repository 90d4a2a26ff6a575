"""The ``codex exec --json`` fallback: one non-interactive run, JSONL into the card.

Used when the app-server is unavailable or failed before a turn started. The
prompt goes in on stdin with ``-`` (an argument would show in ``ps``; a piped
stdin next to an argument is appended as a ``<stdin>`` block, facts 3j). A task
with a thread runs ``codex exec resume <thread>``. Exec cannot ask for
approvals; it runs with Codex's non-interactive policy inside the task's sandbox.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
from collections.abc import AsyncIterator
from typing import Any

from boss_agent.codexbin import CodexBinary, child_environment
from boss_agent.jsonshape import mapping
from boss_agent.redact import sanitize_text
from boss_agent.runner.context import MAX_RESULT_CHARS, RunContext
from boss_agent.runner.turn import TurnOutcome

logger = logging.getLogger(__name__)

MAX_LINE_BYTES = 16 * 1024 * 1024  # an item.completed with a large command output is one line
EXIT_WAIT_S = 10.0  # after stdout closes, codex exec exits at once; this bounds a wedged one
STDERR_TAIL_CHARS = 300  # enough of stderr to say why exec failed, after sanitizing


def exec_argv(binary: CodexBinary, ctx: RunContext) -> list[str]:
    argv = [*binary.argv, "exec"]
    if ctx.thread_id:
        argv += ["resume", ctx.thread_id]
    argv += ["--json", "--skip-git-repo-check", "-c", f'sandbox_mode="{ctx.policy.sandbox}"']
    if ctx.task.model:
        argv += ["-m", ctx.task.model]
    return [*argv, "-"]


def parse_line(line: bytes) -> dict[str, Any] | None:
    """One JSONL event, or None for a line that is not a JSON object (it is skipped)."""
    try:
        event = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    return event if isinstance(event, dict) else None


async def _events(stream: asyncio.StreamReader) -> AsyncIterator[dict[str, Any]]:
    while line := await stream.readline():
        event = parse_line(line)
        if event is not None:
            yield event


class ExecRun:
    def __init__(self, ctx: RunContext, binary: CodexBinary, env: dict[str, str]) -> None:
        self.ctx = ctx
        self.binary = binary
        self.env = env
        self.answer: str | None = None
        self.error: str | None = None
        self.completed = False

    async def run(self) -> TurnOutcome:
        ctx = self.ctx
        proc = await asyncio.create_subprocess_exec(
            *exec_argv(self.binary, ctx), stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ctx.workdir,
            env=child_environment({**self.binary.env, **self.env}), start_new_session=True,
            limit=MAX_LINE_BYTES,
        )
        ctx.ran = True
        try:
            return await self._follow(proc)
        finally:
            # Cancelled from outside (a forced shutdown): the exec process group must
            # not outlive the task, nor its pipes the event loop.
            if proc.returncode is None:
                self._killpg(proc)
                await proc.wait()

    async def _follow(self, proc: asyncio.subprocess.Process) -> TurnOutcome:
        assert proc.stdin and proc.stdout and proc.stderr
        proc.stdin.write(self.ctx.task.prompt.encode())
        proc.stdin.close()
        async with asyncio.TaskGroup() as tg:
            stderr = tg.create_task(proc.stderr.read())
            watcher = tg.create_task(self._kill_on_cancel(proc))
            try:
                async for event in _events(proc.stdout):
                    await self._event(event)
            finally:
                watcher.cancel()
        try:
            code = await asyncio.wait_for(proc.wait(), EXIT_WAIT_S)
        except TimeoutError:
            self._killpg(proc)
            code = await proc.wait()
        return self._outcome(code, stderr.result())

    async def _event(self, event: dict[str, Any]) -> None:
        await self.ctx.feed.feed_exec(event)
        kind = event.get("type")
        item = mapping(event.get("item"))
        if kind == "thread.started" and isinstance(event.get("thread_id"), str):
            self.ctx.thread_id = event["thread_id"]
        elif kind == "item.completed" and item.get("type") == "agent_message":
            self.answer = str(item.get("text") or "")
        elif kind == "turn.completed":
            self.completed = True
        elif kind == "turn.failed":
            error = mapping(event.get("error"))
            self.error = str(error.get("message") or "codex exec failed")
        elif kind == "error" and not self.error:
            self.error = str(event.get("message") or "codex exec failed")

    async def _kill_on_cancel(self, proc: asyncio.subprocess.Process) -> None:
        await self.ctx.cancel.wait()
        self._killpg(proc)

    @staticmethod
    def _killpg(proc: asyncio.subprocess.Process) -> None:
        # exec ran in its own session: the group holds every command it started.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _outcome(self, code: int, stderr: bytes) -> TurnOutcome:
        workdir = self.ctx.workdir
        if self.ctx.cancel.is_set():
            return TurnOutcome("cancelled", "cancelled", "the task was cancelled", self.answer)
        if self.completed and code == 0:
            return TurnOutcome("completed", last_answer=self.answer)
        message = self.error or stderr.decode(errors="replace").strip()[-STDERR_TAIL_CHARS:]
        message = sanitize_text(message or f"codex exec exited with {code}", workdir=workdir,
                                limit=MAX_RESULT_CHARS)
        logger.info("codex exec failed (exit %s)", code)
        return TurnOutcome("failed", "codex_exec_failed" if not self.error else "codex_turn_failed",
                           message, self.answer)
