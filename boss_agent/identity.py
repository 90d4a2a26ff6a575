"""The device's identity on its Boss control plane: server URL, device id, token.

Pairing (device API §1) stores them in the state dir: ``device.json`` holds the
non-secret part, ``device_token`` the token, readable by the owner only (0600).
The token lives only in that file and in memory; ``Identity.__repr__`` hides it, so a
log line or a status dump that prints an identity cannot leak it.

``write_atomic`` is the one durable-write helper (temp file, fsync, rename, fsync of
the directory); the completion spool uses it too. ``owner_only`` and ``private_dir``
keep every file this project creates (state, spool, logs, the control plane's
database with its WAL and SHM) 0600 inside 0700 directories.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import stat
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from boss_agent.errors import StateError
from boss_agent.paths import Stamp, file_stamp

logger = logging.getLogger(__name__)

IDENTITY_FILE = "device.json"
LOCAL_ID_FILE = "local_device_id"  # a gateway-only device's id (no Boss server gave it one)
TOKEN_FILE = "device_token"
OWNER_ONLY_UMASK = 0o077
DEFAULT_HEARTBEAT_INTERVAL_MS = 15_000  # the contract's example value; the server overrides it


@dataclass(frozen=True)
class Identity:
    server_url: str
    device_id: str
    token: str
    heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS

    def __repr__(self) -> str:
        return f"Identity(server_url={self.server_url!r}, device_id={self.device_id!r}, token=***)"

    __str__ = __repr__


@contextlib.contextmanager
def owner_only() -> Iterator[None]:
    """Files created inside are 0600 and directories 0700, whatever the user's umask.

    Only around our own file creation, never for the whole process: codex and the
    commands it runs inherit the umask, and the user's project files must keep theirs.
    """
    old = os.umask(OWNER_ONLY_UMASK)
    try:
        yield
    finally:
        os.umask(old)


def private_dir(path: Path) -> Path:
    """``path`` created, or tightened when it already existed, to 0700."""
    with owner_only():
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    if stat.S_IMODE(path.stat().st_mode) & 0o077:
        path.chmod(0o700)
    return path


def ensure_state_dir(state_dir: Path) -> Path:
    """Create the state dir owner-only (0700); raise StateError when unusable."""
    try:
        private_dir(state_dir)
    except OSError as exc:
        raise StateError(f"state dir {state_dir} cannot be created ({exc.strerror})") from exc
    return state_dir


def write_atomic(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Write ``path`` so that a crash leaves either the old or the new content."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        try:
            view = memoryview(data)
            while view:  # a nearly full disk takes a short write before it says ENOSPC
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, mode)  # O_CREAT's mode is filtered by the umask
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a half-written temp file only eats more of the disk
        raise
    # The rename is durable only once the directory entry is on disk.
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def save_identity(state_dir: Path, identity: Identity) -> None:
    """Store the identity; the token file is written (0600) before the id file."""
    ensure_state_dir(state_dir)
    try:
        write_atomic(state_dir / TOKEN_FILE, identity.token.encode(), 0o600)
        public = {"serverUrl": identity.server_url, "deviceId": identity.device_id,
                  "heartbeatIntervalMs": identity.heartbeat_interval_ms}
        write_atomic(state_dir / IDENTITY_FILE, json.dumps(public).encode(), 0o600)
    except OSError as exc:
        raise StateError(f"cannot store the device identity in {state_dir} ({exc.strerror})") from exc


def load_identity(state_dir: Path) -> Identity | None:
    """The stored identity, or None when this device is not paired."""
    try:
        public = json.loads((state_dir / IDENTITY_FILE).read_text(encoding="utf-8"))
        token = (state_dir / TOKEN_FILE).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise StateError(f"the device identity in {state_dir} is unreadable; pair again") from exc
    if not isinstance(public, dict) or not token:
        raise StateError(f"the device identity in {state_dir} is damaged; pair again")
    try:
        return Identity(str(public["serverUrl"]), str(public["deviceId"]), token,
                        int(public.get("heartbeatIntervalMs") or DEFAULT_HEARTBEAT_INTERVAL_MS))
    except (KeyError, TypeError, ValueError) as exc:
        raise StateError(f"the device identity in {state_dir} is damaged; pair again") from exc


def forget_identity(state_dir: Path) -> bool:
    """Delete the token and the device id; True when there was something to forget."""
    found = False
    for name in (TOKEN_FILE, IDENTITY_FILE):
        try:
            (state_dir / name).unlink()
            found = True
        except FileNotFoundError:
            pass
    return found


def identity_stamp(state_dir: Path) -> Stamp:
    """A cheap change marker of the token file (re-pairing while the daemon runs)."""
    return file_stamp(state_dir / TOKEN_FILE)


def local_device_id(state_dir: Path) -> str:
    """This device's own id for a gateway-only device, created once in the state dir."""
    path = state_dir / LOCAL_ID_FILE
    try:
        existing = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        existing = ""
    except OSError as exc:
        raise StateError(f"the local device id in {state_dir} is unreadable ({exc.strerror})") from exc
    if existing:
        return existing
    device_id = f"local-{uuid.uuid4().hex[:16]}"
    ensure_state_dir(state_dir)
    try:
        write_atomic(path, device_id.encode(), 0o600)
    except OSError as exc:
        raise StateError(f"cannot store the local device id in {state_dir} ({exc.strerror})") from exc
    return device_id
