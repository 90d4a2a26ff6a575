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
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from boss_agent.codexbin import CodexBinary, child_environment
from boss_agent.errors import TaskFailed
from boss_agent.jsonshape import mapping
from boss_agent.redact import sanitize_text
from boss_agent.runner.context import MAX_RESULT_CHARS, RunContext
from boss_agent.runner.turn import TurnOutcome

logger = logging.getLogger(__name__)

MAX_LINE_BYTES = 16 * 1024 * 1024  # an item.completed with a large command output is one line
EXIT_WAIT_S = 10.0  # after stdout closes, codex exec exits at once; this bounds a wedged one
STDERR_TAIL_CHARS = 300  # enough of stderr to say why exec failed, after sanitizing
STDERR_WINDOW_CHARS = 8192  # stderr sanitized before the tail is cut: whole lines around it


def stderr_tail(stderr: bytes, workdir: str | Path | None) -> str:
    """The end of codex exec's stderr, masked first and cut after, from a line start.

    Cutting first could start the tail inside a secret whose head (``sk-``,
    ``Authorization:``) is gone, and what is left of it would no longer be recognised.
    """
    text = stderr.decode(errors="replace").strip()
    if len(text) > STDERR_WINDOW_CHARS:
        text = text[-STDERR_WINDOW_CHARS:]
        text = text[text.find("\n") + 1:]  # from a line start: no secret without its head
    return sanitize_text(text, workdir=workdir, limit=STDERR_TAIL_CHARS, tail=True) if text else ""


def codex_home(env: dict[str, str]) -> Path:
    """The CODEX_HOME codex exec will use with ``env`` (codex's own default otherwise)."""
    configured = env.get("CODEX_HOME") or os.environ.get("CODEX_HOME")
    return Path(configured).expanduser() if configured else Path.home() / ".codex"


def is_codex_id(ref: str) -> bool:
    """A UUID in its plain form (``urn:uuid:`` and other spellings are names to codex)."""
    try:
        return str(uuid.UUID(ref)) == ref.lower()
    except ValueError:
        return False


def has_rollout(home: Path, thread_id: str) -> bool:
    """Whether this device recorded the thread ``thread_id`` (a plain UUID) in ``home``."""
    return is_codex_id(thread_id) and any(
        (home / "sessions").glob(f"*/*/*/rollout-*-{thread_id.lower()}.jsonl"))


def check_resumable(ctx: RunContext, env: dict[str, str]) -> None:
    """Refuse an exec resume that would quietly start a new thread instead.

    ``codex exec resume <name>`` of a name it does not know starts a fresh thread, so
    exec only resumes a codex id whose rollout is on this device.
    """
    ref = ctx.thread_id
    if not ref:
        return
    if not is_codex_id(ref):
        raise TaskFailed("a thread name can only be resolved by the Codex app-server, "
                         "which is unavailable", "app_server_unavailable")
    if not has_rollout(codex_home(env), ref):
        raise TaskFailed("this device has no Codex thread with that reference", "thread_not_found")


def exec_argv(binary: CodexBinary, ctx: RunContext, overrides: Sequence[str] = ()) -> list[str]:
    """Options first, then ``--``, then the positionals: no task field can become an option.

    ``overrides``: further ``-c key=value`` pairs from the device (never from the task),
    e.g. the CUA driver's MCP server.
    """
    argv = [*binary.argv, "exec"]
    if ctx.thread_id:
        argv.append("resume")
    argv += ["--json", "--skip-git-repo-check", "-c", f'sandbox_mode="{ctx.policy.sandbox}"',
             "-c", 'approval_policy="never"']
    for override in overrides:
        argv += ["-c", override]
    if ctx.task.model:
        argv.append(f"--model={ctx.task.model}")
    positionals = [ctx.thread_id, "-"] if ctx.thread_id else ["-"]
    return [*argv, "--", *positionals]


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
    def __init__(self, ctx: RunContext, binary: CodexBinary, env: dict[str, str],
                 overrides: Sequence[str] = ()) -> None:
        self.ctx = ctx
        self.binary = binary
        self.env = env
        self.overrides = tuple(overrides)
        self.answer: str | None = None
        self.error: str | None = None
        self.completed = False

    async def run(self) -> TurnOutcome:
        ctx = self.ctx
        check_resumable(ctx, self.env)
        await ctx.ready_to_act()
        proc = await asyncio.create_subprocess_exec(
            *exec_argv(self.binary, ctx, self.overrides), stdin=asyncio.subprocess.PIPE,
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
        message = self.error or stderr_tail(stderr, workdir)
        message = sanitize_text(message or f"codex exec exited with {code}", workdir=workdir,
                                limit=MAX_RESULT_CHARS)
        logger.info("codex exec failed (exit %s)", code)
        return TurnOutcome("failed", "codex_exec_failed" if not self.error else "codex_turn_failed",
                           message, self.answer)
