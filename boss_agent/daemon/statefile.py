"""The small state file the running daemon keeps current: ``state_dir/state.json``.

``boss-agent status`` reads it without talking to the daemon. The daemon checks it
every few seconds and rewrites it when something a user would ask about changed (a
heartbeat, a task starting or ending, a report spooled), and at least once a minute
so ``updated_at`` shows a live daemon (``StateWriter``). It is written atomically (a temp file in the same
directory, then ``rename``) with mode 0600, so a reader never sees half a file.

Redaction lives in the type: only the keys in ``STATE_KEYS`` may be written, and
every string passes through the sanitizer's ``mask_secrets`` (a server URL with
credentials in it is masked), so no token can land here by accident.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from boss_agent.errors import StateError
from boss_agent.daemon.process import lock_holder
from boss_agent.redact import mask_secrets
from boss_agent.timefmt import utc_now

logger = logging.getLogger(__name__)

STATE_FILE = "state.json"
STATE_REFRESH_S = 60.0  # an unchanged state is rewritten this often (updated_at: alive)

# key -> meaning. Times are ISO 8601 UTC strings ("2026-11-30T03:48:17Z").
STATE_KEYS: Mapping[str, str] = {
    "pid": "the daemon's process id",
    "started_at": "when the daemon started",
    "updated_at": "when this file was last written (set by write_state)",
    "paired": "true when a device token is stored",
    "unpaired": "true when the server revoked the token (401) and the daemon stopped using it",
    "server_url": "the Boss control plane base URL",
    "device_id": "this device's id",
    "codex_version": "codex --version",
    "codex_transport": "stdio, ws or unix",
    "discovered_at": "when capability discovery last succeeded",
    "running_task_ids": "ids of the tasks running now (a list)",
    "spooled_reports": "completion reports waiting in the spool (a count)",
    "last_heartbeat_at": "when the last heartbeat was sent",
    "last_heartbeat_result": "ok, or a short sanitized error",
    "state": "starting, waiting for pairing, running, stopping",
    "gateway_worker_id": "the Redis gateway's worker id (when the gateway is enabled)",
    "gateway_connected": "true while Redis answers the gateway",
    "gateway_group": "the consumer group the gateway reads with",
    "gateway_lease_ttl_s": "how long the worker lease lives without a refresh",
    "gateway_pending": "entries this worker read and has not acked (a count)",
    "gateway_poison": "entries dropped as unparseable since start (a count)",
    "gateway_forwarded": "tasks forwarded to the worker holding their thread or project (a count)",
    "gateway_resume_dropped": "RESUMEs dropped since start: no formId to accept, another form or session (a count)",
    "gateway_threads": "Codex threads this worker holds for the fleet (a count)",
    "gateway_projects": "project ids this worker advertises (a list)",
    "spool_degraded": "true while the disk refuses spool writes (results wait in memory)",
    "spool_refused": "why spooled results wait while the server refuses them as too large (413)",
}
# Times shown by `status` as ages in seconds, under these names.
_AGES = {
    "started_at": "uptime_s",
    "updated_at": "updated_age_s",
    "discovered_at": "discovery_age_s",
    "last_heartbeat_at": "last_heartbeat_age_s",
}




def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return mask_secrets(value)
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    raise ValueError(f"state values are str, number, bool, list or None, not {type(value).__name__}")


def write_state(state_dir: Path, state: Mapping[str, Any]) -> dict[str, Any]:
    """Atomically replace ``state_dir/state.json``; returns what was written.

    ``pid`` defaults to ours and ``updated_at`` is always now. An unknown key is a
    programming error (ValueError): the allow-list is what keeps secrets out.
    """
    unknown = sorted(set(state) - set(STATE_KEYS))
    if unknown:
        raise ValueError(f"unknown state key {unknown[0]!r}")
    data = {"pid": os.getpid(), **{k: _clean(v) for k, v in state.items()}, "updated_at": utc_now()}
    directory = Path(state_dir)
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        # mkstemp creates the file 0600, so the state is never readable by others.
        fd, tmp = tempfile.mkstemp(prefix=".state-", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(tmp, directory / STATE_FILE)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT) or not _overwrite(directory / STATE_FILE, text):
            raise StateError(f"cannot write {directory / STATE_FILE}: {exc.strerror}") from exc
    return data


class StateWriter:
    """``write_state`` for a loop that checks often: a write only when the state changed.

    An unchanged state is rewritten every ``refresh_s`` (``updated_at`` tells ``status``
    the daemon is alive), and a failed write is tried again at the next check.
    """

    def __init__(self, state_dir: Path, refresh_s: float = STATE_REFRESH_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.state_dir = state_dir
        self.refresh_s = refresh_s
        self.clock = clock
        self._written: Mapping[str, Any] | None = None
        self._written_at = 0.0

    def write(self, state: Mapping[str, Any], *, force: bool = False) -> bool:
        """Write ``state`` if it changed, is stale or ``force``; True when it was written."""
        now = self.clock()
        if not force and state == self._written and now - self._written_at < self.refresh_s:
            return False
        self._written = None  # until this write succeeds
        write_state(self.state_dir, state)
        self._written, self._written_at = dict(state), now
        return True


def _overwrite(path: Path, text: str) -> bool:
    """On a full disk, rewrite the existing file in place: the blocks it already has
    hold the new state (a reader may then see a torn file once and ignores it), so
    status can still say why the daemon is degraded."""
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError:
        return False
    data = text.encode()
    try:
        if os.write(fd, data) != len(data):  # no new block: the state is about as long as before
            return False
        os.ftruncate(fd, len(data))
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def read_state(state_dir: Path) -> dict[str, Any] | None:
    """The last written state, or None when there is none (or it is unreadable)."""
    path = Path(state_dir) / STATE_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        logger.warning("ignoring an unreadable state file: %s", exc.__class__.__name__)
        return None
    return data if isinstance(data, dict) else None


def daemon_running(state_dir: Path) -> int | None:
    """The running daemon's pid: its lock is held AND that pid is alive; else None."""
    return lock_holder(Path(state_dir))


def _age_s(stamp: Any, now: datetime) -> float | None:
    if not isinstance(stamp, str):
        return None
    try:
        then = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None
    return max(0.0, (now - then).total_seconds())


def status_snapshot(state_dir: Path, now: datetime | None = None) -> dict[str, Any]:
    """What ``boss-agent status`` shows: the state file plus liveness and ages.

    ``running`` / ``daemon_pid`` come from the lock, not from the file, so a daemon
    that crashed is reported as not running even though its last state remains.
    """
    now = now or datetime.now(UTC)
    state = read_state(state_dir) or {}
    pid = daemon_running(state_dir)
    snapshot = {k: state.get(k) for k in STATE_KEYS if k != "pid"}
    snapshot.update(running=pid is not None, daemon_pid=pid, state_file=state != {})
    for key, name in _AGES.items():
        snapshot[name] = _age_s(state.get(key), now)
    if pid is None:
        snapshot["running_task_ids"] = []  # a dead daemon runs nothing
        snapshot["state"] = "stopped"
    return snapshot
