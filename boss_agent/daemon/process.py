"""The daemon's process: one instance, systemd notifications, signals and the graceful stop.

Three independent pieces the daemon wires into its main loop:

* ``InstanceLock`` — one daemon per state dir. ``fcntl.flock`` on
  ``state_dir/daemon.lock``; the file holds the owner's pid so a refused second
  start can name it. The kernel drops the lock when the process dies, so a crash
  never leaves a stale lock behind (a stale *pid* may stay; readers check both).
* ``sd_notify`` / ``Watchdog`` — ``READY=1`` once everything is up, ``WATCHDOG=1``
  from the main loop while it is healthy; no-ops outside systemd.
* ``ShutdownController`` — signals become awaitable events, like uvicorn: the first
  SIGTERM/SIGINT sets ``stopping`` (take no new work), ``grace_period_s`` later
  ``force_cancel`` is set (interrupt what still runs); a second signal sets it at
  once. SIGHUP sets ``reload``. No tasks are spawned: the grace timer is a loop
  callback, cancelled on exit.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import logging
import os
import signal
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType

from boss_agent.aio import periodic
from boss_agent.errors import AlreadyRunning, StateError

logger = logging.getLogger(__name__)

LOCK_FILE = "daemon.lock"
# A status probe holds a shared lock for microseconds; a daemon starting in that
# instant retries briefly instead of refusing to start.
LOCK_RETRIES = 5
LOCK_RETRY_DELAY_S = 0.02

READY = "READY=1"
STOPPING = "STOPPING=1"
RELOADING = "RELOADING=1"
WATCHDOG = "WATCHDOG=1"


# ---------------------------------------------------------------- instance lock


def _read_pid(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() and int(text) > 0 else None


class InstanceLock:
    """An exclusive ``flock`` on ``state_dir/daemon.lock`` that records our pid.

    ``acquire`` raises ``AlreadyRunning(pid)`` when another process (or another
    ``InstanceLock`` in this one) holds it. Usable as a context manager. ``file_name``
    names another lock in the same way (the control plane's, beside its database).
    """

    def __init__(self, state_dir: Path, file_name: str = LOCK_FILE) -> None:
        self.path = Path(state_dir) / file_name
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        if self._fd is not None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            # Not O_TRUNC: the pid inside belongs to the holder until we hold the lock.
            # Python fds are close-on-exec, so codex children never inherit the lock.
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StateError(f"cannot open the lock file in {self.path.parent}: {exc.strerror}") from exc
        try:
            self._lock(fd)
            self._record_pid(fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        logger.debug("instance lock acquired: %s", self.path)

    def _record_pid(self, fd: int) -> None:
        pid = f"{os.getpid()}\n".encode("ascii")
        try:
            # Over the old pid, then cut: the file keeps its block, so a full disk still
            # takes it. The lock is what counts; a missing pid only hides us from status.
            os.pwrite(fd, pid, 0)
            os.ftruncate(fd, len(pid))
        except OSError as exc:
            logger.warning("cannot record our pid in %s (%s)", self.path, exc.strerror)

    def _lock(self, fd: int) -> None:
        for attempt in range(LOCK_RETRIES):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if attempt + 1 < LOCK_RETRIES:
                    time.sleep(LOCK_RETRY_DELAY_S)
            except OSError as exc:
                raise StateError(f"cannot lock {self.path}: {exc.strerror}") from exc
        raise AlreadyRunning(_read_pid(self.path))

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            # Empty the pid before unlocking: a reader that sees the lock free also
            # sees no pid, never ours.
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # closing the last descriptor drops the flock

    def __enter__(self) -> InstanceLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def lock_holder(state_dir: Path) -> int | None:
    """The pid of the live process holding ``state_dir``'s lock, else None.

    Probes with a non-blocking shared lock (released at once), so it never
    disturbs the holder.
    """
    path = Path(state_dir) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = _read_pid(path)
        return pid if pid is not None and pid_alive(pid) else None
    except OSError:
        return None
    finally:
        os.close(fd)
    return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True


# ------------------------------------------------------------ systemd notify


def _notify_address(raw: str) -> str | bytes:
    # '@name' is Linux's abstract namespace: a leading NUL byte instead of a path.
    return b"\0" + raw[1:].encode() if raw.startswith("@") else raw


def sd_notify(message: str, environ: Mapping[str, str] | None = None) -> bool:
    """Send ``message`` (``READY=1``, ``WATCHDOG=1``, …) to ``$NOTIFY_SOCKET``.

    Returns False, doing nothing, outside systemd; a send failure is logged at
    debug and returns False (a lost notification must never stop the daemon).
    """
    raw = (os.environ if environ is None else environ).get("NOTIFY_SOCKET")
    if not raw:
        return False
    # Non-blocking: a unix datagram send blocks while the receiver's queue is full,
    # and a stalled receiver must not freeze our event loop.
    kind = socket.SOCK_DGRAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK
    try:
        with socket.socket(socket.AF_UNIX, kind) as sock:
            sock.sendto(message.encode(), _notify_address(raw))
    except OSError as exc:
        logger.debug("sd_notify failed: %s", errno.errorcode.get(exc.errno or 0, exc))
        return False
    return True


class Watchdog:
    """Pings systemd's watchdog at half of ``WATCHDOG_USEC`` while ``healthy()``."""

    def __init__(self, interval_s: float | None) -> None:
        self.interval_s = interval_s

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Watchdog:
        env = os.environ if environ is None else environ
        usec, owner = env.get("WATCHDOG_USEC", ""), env.get("WATCHDOG_PID", "")
        if not usec.isdigit() or int(usec) == 0:
            return cls(None)
        if owner and owner != str(os.getpid()):
            return cls(None)  # meant for another process (we were forked or exec'd into)
        # Half the timeout: one late ping still lands before systemd gives up.
        return cls(int(usec) / 1_000_000 / 2)

    @property
    def enabled(self) -> bool:
        return self.interval_s is not None

    async def run(self, healthy: Callable[[], bool], stop: asyncio.Event | None = None) -> None:
        """Ping until ``stop`` is set (or forever); returns at once when disabled.

        An unhealthy tick skips the ping, so a wedged loop lets systemd restart us.
        """
        if self.interval_s is None:
            return
        async for _ in periodic(self.interval_s, until=stop):
            if healthy():
                sd_notify(WATCHDOG)
            else:
                logger.warning("main loop unhealthy: withholding the watchdog ping")


# ------------------------------------------------------------ graceful stop

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class ShutdownController:
    """Signals as awaitable events: ``stopping``, ``force_cancel`` and ``reload``.

    Use inside the running loop::

        with ShutdownController(config.grace_period_s) as shutdown:
            ...  # stop claiming when shutdown.stopping is set,
            ...  # cancel running tasks when shutdown.force_cancel is set

    ``handle_signals=False`` leaves the process's signal handlers alone (a daemon
    run inside a test or another program); ``request_stop`` and ``force`` still work.
    The consumer clears ``reload`` after it has reloaded.
    """

    def __init__(self, grace_period_s: float, *, handle_signals: bool = True) -> None:
        self.grace_period_s = grace_period_s
        self.stopping = asyncio.Event()
        self.force_cancel = asyncio.Event()
        self.reload = asyncio.Event()
        self.stop_reason: str | None = None
        self._handle_signals = handle_signals
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._installed: list[signal.Signals] = []

    def install(self) -> None:
        """Bind to the running loop and install the signal handlers."""
        self._loop = asyncio.get_running_loop()
        if not self._handle_signals:
            return
        for sig in (*STOP_SIGNALS, signal.SIGHUP):
            self._loop.add_signal_handler(sig, self._on_signal, sig)
            self._installed.append(sig)

    def uninstall(self) -> None:
        """Cancel the grace timer and restore the default signal handlers."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._installed and self._loop is not None:
            self._loop.remove_signal_handler(self._installed.pop())

    def __enter__(self) -> ShutdownController:
        self.install()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.uninstall()

    def request_stop(self, reason: str = "requested") -> None:
        """Stop taking new work; force-cancel after the grace period. Idempotent."""
        if self.stopping.is_set():
            return
        self.stop_reason = reason
        self.stopping.set()
        logger.info("stopping (%s): running tasks get %ss to finish", reason, self.grace_period_s)
        loop = self._loop or asyncio.get_running_loop()
        # A loop callback, not a task: nothing to await or leak at teardown.
        self._timer = loop.call_later(self.grace_period_s, self._grace_over)

    def force(self, reason: str = "forced") -> None:
        """Interrupt running work now (also sets ``stopping``)."""
        if not self.stopping.is_set():
            self.stop_reason = reason
            self.stopping.set()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self.force_cancel.is_set():
            logger.info("interrupting running tasks (%s)", reason)
            self.force_cancel.set()

    def _grace_over(self) -> None:
        self._timer = None
        self.force("grace period over")

    def _on_signal(self, sig: signal.Signals) -> None:
        if sig == signal.SIGHUP:
            logger.info("received SIGHUP: reloading the configuration")
            self.reload.set()
        elif self.stopping.is_set():
            self.force(f"second {sig.name}")
        else:
            self.request_stop(sig.name)
