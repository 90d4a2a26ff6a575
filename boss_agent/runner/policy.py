"""What a task may do here: its workdir, approval policy, sandbox and approval mode.

The stricter of the task's wish and the device's limit wins. A task asking for
more than the device allows gets the device's limit and a warning for the card;
a workdir outside every configured workspace root refuses the task before
anything runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from boss_agent.config import APPROVAL_POLICIES, SANDBOXES, Config
from boss_agent.errors import TaskRejected
from boss_agent.paths import is_inside
from boss_agent.tasks import Task

WORKDIR_NOT_ALLOWED = "workdir_not_allowed"


@dataclass(frozen=True)
class Policy:
    approval_policy: str
    sandbox: str
    approval_mode: str
    warnings: tuple[tuple[str, str], ...] = ()  # (kind, message) for boss/warning


def resolve_workdir(task: Task, config: Config) -> Path:
    """The task's workdir, symlinks and ``..`` resolved, inside a workspace root.

    No workdir means the first workspace root. Anything else outside every root,
    or not an existing directory, raises ``TaskRejected`` (workdir_not_allowed).
    """
    roots = [Path(os.path.realpath(root)) for root in config.workspaces]
    if not task.workdir:
        return roots[0]
    raw = Path(os.path.expanduser(task.workdir))
    if not raw.is_absolute():
        # A relative workdir is relative to the first root, so "../../etc" climbs out of it.
        raw = roots[0] / raw
    resolved = Path(os.path.realpath(raw))
    if not any(is_inside(resolved, root) for root in roots):
        raise TaskRejected("the workdir is not inside a configured workspace", WORKDIR_NOT_ALLOWED)
    if not resolved.is_dir():
        raise TaskRejected("the workdir does not exist", WORKDIR_NOT_ALLOWED)
    return resolved


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
