"""What a task may do here: its workdir, approval policy, sandbox and approval mode.

The stricter of the task's wish and the device's limit wins. A task asking for
more than the device allows gets the device's limit and a warning for the card;
a workdir outside every configured workspace root refuses the task before
anything runs, and so does the home directory itself or a hidden directory below
a root (``~/.ssh``, ``~/.config/systemd``) unless the owner listed that exact path.

A task naming no workdir runs in its project's path (``[projects]``); else, for a
follow-up, in the folder its thread last ran in (``record_thread_workdir``), checked
against the workspace rules of now; else in the configured ``default_workdir``, else in
a scratch directory of its own thread under the state dir. ``sweep_scratch`` removes
the scratch directories that stayed empty and unused for a week (each use refreshes a
directory's time), with their thread links.

``sandbox_policy`` spells a sandbox the way ``turn/start`` takes it: every turn restates
the limits, since codex keeps a loaded thread's own otherwise.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from boss_agent.config import APPROVAL_POLICIES, SANDBOXES, Config
from boss_agent.errors import TaskRejected
from boss_agent.paths import parts_below
from boss_agent.tasks import Task

WORKDIR_NOT_ALLOWED = "workdir_not_allowed"
SCRATCH_DIR = "scratch"  # under the state dir: one directory per thread
THREADS_DIR = "threads"  # under the state dir: one link per thread to the folder it last ran in
SCRATCH_KEEP_S = 7 * 24 * 3600.0  # an empty scratch dir unused this long is removed


@dataclass(frozen=True)
class Policy:
    approval_policy: str
    sandbox: str
    approval_mode: str
    warnings: tuple[tuple[str, str], ...] = ()  # (kind, message) for boss/warning


def _allowed(path: str, config: Config) -> bool:
    """Inside a root; neither home itself nor hidden below a root, unless listed exactly.

    ``path`` is resolved; so is each root here, now (a root may be a symlink the owner moves).
    """
    roots = [os.path.realpath(root) for root in config.workspaces]
    if config.workspaces_listed and path in roots:
        return True
    if path == os.path.realpath(os.path.expanduser("~")):
        return False
    for root in roots:
        below = parts_below(path, root)
        if below is not None and not any(part.startswith(".") for part in below):
            return True
    return False


def _not_a_dir(path: Path) -> str:
    """Why ``path`` (not a directory) cannot be a workdir: a file is not "missing"."""
    return "is not a directory" if path.exists() else "does not exist"


def _checked(raw: Path, config: Config) -> Path:
    try:
        resolved = os.path.realpath(raw)
    except (OSError, ValueError) as exc:  # a NUL byte, a name too long
        raise TaskRejected("the workdir is not a usable path", WORKDIR_NOT_ALLOWED) from exc
    if not _allowed(resolved, config):
        raise TaskRejected("the workdir is not inside a configured workspace", WORKDIR_NOT_ALLOWED)
    if not os.path.isdir(resolved):
        raise TaskRejected(f"the workdir {_not_a_dir(Path(resolved))}", WORKDIR_NOT_ALLOWED)
    return Path(resolved)


def scratch_key(task: Task) -> str:
    """The scratch directory's name: the thread's ref, or one derived from the task id.

    Refs are validated plain names; a task id is any string, so it is hashed.
    """
    ref = task.codex_thread_ref or task.target_thread_ref
    if ref:
        return ref
    return "task-" + hashlib.sha256(task.task_id.encode()).hexdigest()[:16]


def scratch_dir(config: Config, key: str) -> Path:
    path = config.state_dir / SCRATCH_DIR / key
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.utime(path)  # used now: the sweep keeps it (through a thread link too)
    return Path(os.path.realpath(path))


def sweep_scratch(config: Config, keep_s: float = SCRATCH_KEEP_S) -> int:
    """Remove scratch dirs that are empty and unused for ``keep_s``, and the thread
    links left pointing nowhere; the number of dirs removed. Blocking.

    Only ``rmdir``: a directory holding anything Codex wrote is never touched, and
    links are never followed.
    """
    root = config.state_dir / SCRATCH_DIR
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return 0
    cutoff = time.time() - keep_s
    removed = 0
    for entry in entries:
        if entry.is_symlink() or not entry.is_dir(follow_symlinks=False):
            continue
        try:
            if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                os.rmdir(entry.path)  # fails on a non-empty directory: it stays
                removed += 1
        except OSError:
            continue
    for entry in entries:
        if entry.is_symlink() and not os.path.exists(entry.path):  # its directory is gone
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
    return removed


def link_scratch(config: Config, workdir: Path, thread_id: str | None) -> None:
    """After a new thread started in a task's scratch dir, its follow-ups find it by thread id."""
    scratch = os.path.realpath(config.state_dir / SCRATCH_DIR)
    if not thread_id or os.path.dirname(workdir) != scratch:
        return
    with contextlib.suppress(FileExistsError):  # linked already
        os.symlink(workdir.name, os.path.join(scratch, thread_id))


def _thread_link(config: Config, ref: str) -> Path:
    return config.state_dir / THREADS_DIR / ref


def record_thread_workdir(config: Config, workdir: Path, thread_id: str | None) -> None:
    """The folder the thread ``thread_id`` runs in, for its next follow-up. Blocking.

    A link per thread (refs are validated plain names), replaced when a follow-up moved
    the thread; a scratch dir also gets its scratch link (``link_scratch``).
    """
    if not thread_id:
        return
    link_scratch(config, workdir, thread_id)
    link, target = str(_thread_link(config, thread_id)), str(workdir)
    with contextlib.suppress(OSError):
        if os.readlink(link) == target:
            return
    if _symlink(target, link):  # the thread's first link: one call, atomic on its own
        return
    fresh = os.path.join(os.path.dirname(link), f".{thread_id}.new")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(fresh)
    os.symlink(target, fresh)
    os.replace(fresh, link)  # atomic: a reader sees the old folder or the new one


def _symlink(target: str, link: str) -> bool:
    """Make ``link`` (and its directory); False when something is there already."""
    try:
        os.symlink(target, link)
    except FileNotFoundError:
        os.makedirs(os.path.dirname(link), mode=0o700, exist_ok=True)
        os.symlink(target, link)
    except FileExistsError:
        return False
    return True


def recorded_workdir(config: Config, ref: str) -> Path | None:
    """The folder the thread ``ref`` last ran in on this device, or None (never recorded)."""
    try:
        return Path(os.readlink(_thread_link(config, ref)))
    except OSError:
        return None


def in_scratch(config: Config, workdir: Path) -> bool:
    """Whether ``workdir`` (resolved) is one of the device's scratch directories."""
    return workdir.parent == Path(os.path.realpath(config.state_dir / SCRATCH_DIR))


def _follow_up_workdir(task: Task, config: Config) -> Path | None:
    """A follow-up naming no folder runs where its thread last ran, if that is allowed now."""
    ref = task.codex_thread_ref or task.target_thread_ref
    recorded = recorded_workdir(config, ref) if ref else None
    if recorded is None:
        return None
    if in_scratch(config, recorded):
        return scratch_dir(config, recorded.name)  # the device's own; made again if swept
    return _checked(recorded, config)


def resolve_workdir(task: Task, config: Config) -> Path:
    """Where the task runs, symlinks and ``..`` resolved; ``TaskRejected`` when not allowed."""
    if task.workdir:
        raw = Path(os.path.expanduser(task.workdir))
        if not raw.is_absolute():
            # A relative workdir is relative to the first root, so "../../etc" climbs out of it.
            raw = Path(os.path.realpath(config.workspaces[0])) / raw
        return _checked(raw, config)
    project = config.projects.get(task.project_id or "")
    if project is not None:
        return _checked(project, config)
    followed = _follow_up_workdir(task, config)
    if followed is not None:
        return followed
    if config.default_workdir is not None:
        if not config.default_workdir.is_dir():
            raise TaskRejected(f"the configured default_workdir {_not_a_dir(config.default_workdir)}",
                               WORKDIR_NOT_ALLOWED)
        return Path(os.path.realpath(config.default_workdir))
    return scratch_dir(config, scratch_key(task))


def sandbox_policy(sandbox: str) -> dict[str, Any]:
    """``turn/start``'s ``sandboxPolicy`` for a sandbox mode: what ``thread/start`` makes
    of that mode (no extra writable roots, no network; /tmp stays writable)."""
    if sandbox == "read-only":
        return {"type": "readOnly", "networkAccess": False}
    if sandbox == "workspace-write":
        return {"type": "workspaceWrite", "writableRoots": [], "networkAccess": False,
                "excludeTmpdirEnvVar": False, "excludeSlashTmp": False}
    if sandbox == "danger-full-access":
        return {"type": "dangerFullAccess"}
    raise ValueError(f"unknown sandbox mode {sandbox!r}")  # config.SANDBOXES is the whole list


def _capped(wanted: str | None, default: str, limit: str, order: tuple[str, ...]) -> tuple[str, bool]:
    """``order`` is strictest first; returns (value, capped)."""
    value = wanted or default
    if order.index(value) > order.index(limit):
        return limit, True
    return value, False


def resolve_policy(task: Task, config: Config) -> Policy:
    codex = config.codex
    warnings: list[tuple[str, str]] = []
    approval, capped = _capped(task.approval_policy, codex.approval_policy,
                               codex.max_approval_policy, APPROVAL_POLICIES)
    if capped:
        warnings.append(("policy", f"approval policy capped to {approval} by this device"))
    sandbox, capped = _capped(task.sandbox, codex.sandbox, codex.max_sandbox, SANDBOXES)
    if capped:
        warnings.append(("policy", f"sandbox capped to {sandbox} by this device"))
    mode = task.approval_mode
    if mode not in codex.approval_modes:
        # "deny" is always the stricter mode; a device that allows neither still denies.
        mode = "deny"
        warnings.append(("policy", "remote approvals are disabled on this device; requests are declined"))
    return Policy(approval, sandbox, mode, tuple(warnings))
