"""The state one task's run carries through the runner's modules."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from boss_agent.config import Config
from boss_agent.runner.feed import CardFeed
from boss_agent.jsonshape import mapping
from boss_agent.runner.policy import Policy, record_thread_workdir, sandbox_policy
from boss_agent.tasks import Task, TaskSink

logger = logging.getLogger(__name__)
# The threads' folder links, one at a time, off the event loop (a few system calls each).
_LINKS = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="boss-thread-links")

MAX_RESULT_CHARS = 20_000  # resultText is the answer, not a transcript


@dataclass
class RunContext:
    task: Task
    config: Config
    sink: TaskSink
    cancel: asyncio.Event
    workdir: Path
    policy: Policy
    feed: CardFeed
    started_at: float = field(default_factory=time.time)
    thread_id: str | None = None
    turn_id: str | None = None
    model: str | None = None  # the thread's model (a collaboration mode needs it named)
    ran: bool = False  # something was handed to Codex (so git facts are worth reading)
    # Pid of the app-server child this daemon started, read when needed (it restarts);
    # None when the app-server is not ours, so its reported pids are never killed here.
    app_server_pid: Callable[[], int | None] = lambda: None
    # The thread whose folder is being recorded (``turn_began``), and that recording.
    _recording: tuple[str, concurrent.futures.Future[None]] | None = field(default=None, repr=False)

    def turn_began(self, turn_id: str) -> None:
        """Codex runs a turn of this task now (``turn/start`` answered, or a steer sent).

        The thread's folder is recorded for its next follow-up from here, in a thread of
        its own while the turn runs (``thread_recorded``): the link is file-system work the
        turn's result need not wait for. The recording tells the event loop nothing when it
        ends (``thread_recorded`` looks), which spares the loop a wake-up per task.
        """
        self.turn_id = turn_id
        self.ran = True
        if self.thread_id is not None and self._recording is None:
            self._recording = (self.thread_id, _LINKS.submit(self._record_thread, self.thread_id))

    async def thread_recorded(self) -> None:
        """Before the task's result goes out: the folder of the thread the task ended on is
        recorded (``codex exec`` names its thread only as it runs: recorded here)."""
        if self.thread_id is None:
            return
        if self._recording is None or self._recording[0] != self.thread_id:
            self._recording = (self.thread_id, _LINKS.submit(self._record_thread, self.thread_id))
        recording = self._recording[1]
        if not recording.done():  # done long before, as a rule: no wake-up of the loop for it
            await asyncio.wrap_future(recording)
        recording.result()  # a bug in the recording raises here, not nowhere

    def _record_thread(self, thread_id: str) -> None:
        try:
            record_thread_workdir(self.config, self.workdir, thread_id)
        except OSError as exc:
            logger.warning("could not record the thread's folder: %s", exc.__class__.__name__)

    async def ready_to_act(self) -> None:
        """Wait until the source may let Codex act on this task (its optional sink method
        ``ready_to_run``: the Boss source's running journal is on disk then).

        Called right before the first call that runs or changes anything (``turn/start``,
        ``turn/steer``, injected items, ``codex exec``), never before: ``thread/start``
        and ``thread/resume`` run nothing, so they overlap with the source's write.
        """
        await self.sink.ready_to_run()

    def input(self, text: str | None = None) -> list[dict[str, Any]]:
        return [{"type": "text", "text": self.task.prompt if text is None else text}]

    def thread_params(self) -> dict[str, Any]:
        """thread/start and thread/resume overrides: the policy is set per thread.

        codex 0.171 refuses ``untrusted`` in config.toml, so it can only come from here.
        """
        params: dict[str, Any] = {"cwd": str(self.workdir),
                                  "approvalPolicy": self.policy.approval_policy,
                                  "sandbox": self.policy.sandbox}
        if self.task.model:
            params["model"] = self.task.model
        return params

    def limits(self) -> dict[str, Any]:
        """The task's limits of now as ``turn/start`` and ``thread/settings/update`` take them."""
        return {"cwd": str(self.workdir), "approvalPolicy": self.policy.approval_policy,
                "sandboxPolicy": sandbox_policy(self.policy.sandbox)}

    def limits_hold(self, settings: Any) -> bool:
        """Whether a thread's settings as codex reports them (``thread/resume``'s answer)
        are this task's: its folder, approval policy and sandbox, nothing looser."""
        settings = mapping(settings)
        sandbox, wanted = mapping(settings.get("sandbox")), sandbox_policy(self.policy.sandbox)
        roots = sandbox.get("writableRoots") or []
        return (settings.get("cwd") == str(self.workdir)
                and settings.get("approvalPolicy") == self.policy.approval_policy
                and sandbox.get("type") == wanted["type"]
                and (not sandbox.get("networkAccess") or bool(wanted.get("networkAccess")))
                and isinstance(roots, list) and all(root in wanted.get("writableRoots", []) for root in roots))

    def turn_params(self) -> dict[str, Any]:
        """turn/start overrides: the limits, and Plan mode when the task asks for it.

        The limits (folder, approval policy, sandbox) are restated on every turn: codex
        0.171 ignores ``thread/resume``'s overrides for a thread it has loaded already, so
        without this a follow-up would run in the thread's first folder under an earlier
        task's looser limits (test_runner_appserver.py).
        """
        params: dict[str, Any] = self.limits()
        mode = self.task.collaboration_mode
        if mode and (self.task.model or self.model):
            # developer_instructions None: codex's built-in instructions for the mode.
            params["collaborationMode"] = {"mode": mode, "settings": {
                "model": self.task.model or self.model, "developer_instructions": None}}
        return params
