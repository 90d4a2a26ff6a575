"""One Codex thread made ahead, so the next task in the same folder skips ``thread/start``.

codex takes 6–17 ms here to make a thread (it reads its configuration and sets the
session up), and a new task's first words wait for it. After a task ran on the
app-server, the runner has codex make one more thread with that task's
``thread/start`` parameters (its folder, approval policy, sandbox and model), a
moment later so that the task's result goes out first. The next task takes it only if
it would have asked codex for exactly that thread itself, now:

- the same ``thread/start`` parameters, as the task works them out from the limits in
  force when it starts (``RunContext.thread_params``);
- the same configuration (a reload makes a new ``Config``: every thread made before it
  is let go) and the same app-server connection;
- codex's own configuration files unchanged (``codex_files``: codex reads them when it
  makes a thread, so an edit after that would not reach a thread made before it; it
  reads ``AGENTS.md`` at the first turn, which is later anyway);
- made at most ``MAX_AGE_S`` ago.

Otherwise the task makes its own thread, as it always did, and the one made ahead is
let go: ``thread/unsubscribe``, after which codex unloads it
(``thread_unload_delay_secs``). A thread that never had a turn has no rollout file, so
nothing of it stays on disk. Every turn restates its limits on ``turn/start`` as well
(``RunContext.turn_params``), the thread made ahead's included.

A task in a scratch folder of its own (no workdir, project or ``default_workdir``)
never takes one: its folder is new for each task. ``codex.thread_ahead = false``
turns this off.

The thread made ahead, at most one:

    state      what is held                  moves
    empty      nothing                       -> waiting (``make``)
    waiting    the wish, for MAKE_AFTER_S    -> making; -> empty (a task came first: cancelled)
    making     ``thread/start`` in flight     -> ready (answered); -> empty (refused, codex gone)
    ready      codex's answer                -> empty (taken, or let go)

A task that comes while the thread is being made waits for it: the answer comes
sooner than that of a ``thread/start`` of its own.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from boss_agent.config import Config
from boss_agent.errors import AppServerError
from boss_agent.paths import Stamp, file_stamp

if TYPE_CHECKING:
    from boss_agent.appserver.contract import Client

logger = logging.getLogger(__name__)

MAX_AGE_S = 300.0  # beyond this a thread made ahead is let go, whatever else holds
MAKE_AFTER_S = 0.05  # after the task that asks for it: that task's result is sent first
CLOSE_WAIT_S = 2.0  # at shutdown, for a thread/start or thread/unsubscribe in flight
# The files codex reads when it makes a thread: its home's, the machine's, and a project's
# own ``.codex/config.toml`` in the folder or any folder above it.
HOME_FILES = ("config.toml", "managed_config.toml", "requirements.toml")
SYSTEM_DIR = Path("/etc/codex")
PROJECT_FILE = os.path.join(".codex", "config.toml")

def codex_files(codex_home: Path, cwd: str) -> tuple[Stamp, ...]:
    """What codex's configuration files look like now, for a thread in ``cwd``: a file
    edited, added or removed gives another value. A dozen ``stat`` calls."""
    stamps = [file_stamp(os.path.join(root, name)) for root in (codex_home, SYSTEM_DIR) for name in HOME_FILES]
    folder = cwd
    while True:
        stamps.append(file_stamp(os.path.join(folder, PROJECT_FILE)))
        parent = os.path.dirname(folder)
        if parent == folder:
            return tuple(stamps)
        folder = parent


@dataclass(frozen=True)
class _Made:
    """A thread codex made ahead, and everything it was made under."""

    started: dict[str, Any]  # thread/start's answer
    params: dict[str, Any]
    config: Config
    client: Client
    files: tuple[Stamp, ...]
    made_at: float

    @property
    def thread_id(self) -> str:
        return str(self.started["thread"]["id"])


async def _finished(making: asyncio.Task[None]) -> None:
    """Until ``making`` ended, however it ended; the waiter's own cancel still raises."""
    try:
        await asyncio.shield(making)
    except asyncio.CancelledError:
        waiter = asyncio.current_task()
        if not making.cancelled() or (waiter is not None and waiter.cancelling()):
            raise  # the waiter was cancelled, not (only) the making
    except Exception:  # noqa: BLE001 - _make logs its own failures
        pass


class ThreadsAhead:
    """Holds at most one thread made ahead (the table above); one per ``Runner``."""

    def __init__(self, codex_home: Path, *, clock: Callable[[], float] = time.monotonic,
                 max_age_s: float = MAX_AGE_S, make_after_s: float = MAKE_AFTER_S) -> None:
        self.codex_home = codex_home
        self.clock = clock
        self.max_age_s = max_age_s
        self.make_after_s = make_after_s
        self._ready: _Made | None = None
        self._making: asyncio.Task[None] | None = None
        self._sent = False  # the making's thread/start is on its way: wait for it, never cancel
        self._letting_go: set[asyncio.Task[None]] = set()  # one short request each

    # ------------------------------------------------------------------ the task's side

    async def take(self, client: Client, config: Config, params: dict[str, Any]) -> dict[str, Any] | None:
        """``thread/start``'s answer for a thread made ahead exactly as ``params`` asks,
        under ``config``, on ``client``; None when there is none (the caller makes its own)."""
        making = self._making
        if making is not None and not making.done():
            if not self._sent:
                making.cancel()  # nothing was asked of codex yet: the task's own comes sooner
            else:
                await _finished(making)  # its result lands in _ready
        made, self._ready = self._ready, None
        if made is None:
            return None
        if self._holds(made, client, config, params):
            logger.debug("a new task takes the thread made ahead")
            return made.started
        self._let_go(made)
        return None

    def _holds(self, made: _Made, client: Client, config: Config, params: dict[str, Any]) -> bool:
        return (made.client is client and not client.closed and made.config is config
                and made.params == params and self.clock() - made.made_at <= self.max_age_s
                and made.files == codex_files(self.codex_home, str(params.get("cwd"))))

    # ------------------------------------------------------------------ after a task

    def make(self, client: Client, config: Config, params: dict[str, Any]) -> None:
        """Have codex make a thread for the next task like the one that just ran here."""
        if not config.codex.thread_ahead or client.closed:
            return
        if self._making is not None and not self._making.done():
            return  # one at a time; the next task's end asks again
        ready = self._ready
        if ready is not None:
            if self._holds(ready, client, config, params):
                return  # the one held is still right
            self._ready = None
            self._let_go(ready)
        self._sent = False
        self._making = asyncio.get_running_loop().create_task(self._make(client, config, dict(params)))

    async def _make(self, client: Client, config: Config, params: dict[str, Any]) -> None:
        await asyncio.sleep(self.make_after_s)
        files = codex_files(self.codex_home, str(params.get("cwd")))  # before codex reads them
        made_at = self.clock()
        self._sent = True
        try:
            started = await client.thread_start(**params)
        except AppServerError as exc:  # refused, or codex went away: the next task makes its own
            logger.debug("no thread made ahead: %s", exc.__class__.__name__)
            return
        except Exception:  # a bug here must cost the next task its head start, nothing more
            logger.exception("making a thread ahead failed")
            return
        made = _Made(started, params, config, client, files, made_at)
        if self._ready is not None:  # cannot happen with one making at a time; never leak one
            self._let_go(self._ready)
        self._ready = made

    async def settled(self) -> None:
        """Until no thread is being made (tests and the bench wait for this)."""
        if self._making is not None:
            await _finished(self._making)

    @property
    def held(self) -> str | None:
        """The id of the thread made ahead, when one is ready."""
        return self._ready.thread_id if self._ready is not None else None

    # ------------------------------------------------------------------ letting go

    def _let_go(self, made: _Made) -> None:
        if made.client.closed:
            return  # gone with its connection
        job = asyncio.get_running_loop().create_task(self._unsubscribe(made))
        self._letting_go.add(job)
        job.add_done_callback(self._letting_go.discard)

    @staticmethod
    async def _unsubscribe(made: _Made) -> None:
        try:
            await made.client.call("thread/unsubscribe", {"threadId": made.thread_id})
        except AppServerError as exc:
            logger.debug("could not let go of the thread made ahead: %s", exc.__class__.__name__)

    async def aclose(self) -> None:
        """Stop making threads ahead and let go of the one held (before the app-server
        closes); bounded: a codex that does not answer is not waited for."""
        making = self._making
        if making is not None and not making.done():
            if self._sent:
                await asyncio.wait([making], timeout=CLOSE_WAIT_S)  # its thread is let go below
            making.cancel()
        made, self._ready = self._ready, None
        if made is not None:
            self._let_go(made)
        jobs = [job for job in (making, *self._letting_go) if job is not None]
        if self._letting_go:
            await asyncio.wait(list(self._letting_go), timeout=CLOSE_WAIT_S)
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)

__all__ = ["MAX_AGE_S", "ThreadsAhead", "codex_files"]
