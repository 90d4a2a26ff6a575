"""SIGHUP: re-read the configuration and apply what can change while the daemon runs.

Live keys shape what the NEXT task may do (workspaces, projects, default workdir,
approval and sandbox policy, fallbacks, the approval timeout) or how the daemon
logs; running tasks keep the settings they started with, and the next turn of every
thread, an old one's too, gets the new limits (the runner restates them per turn).
Keys that shape connections or the process itself (the server, the state dir, codex's
binary and transport, the gateway, slot count) need a restart: a reload names them in
the log and leaves them as they are. A config that fails to load leaves everything as
it was.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from boss_agent.config import KEYS, Config, config_value

logger = logging.getLogger(__name__)

LIVE_KEYS = frozenset({
    "log_level", "workspaces", "default_workdir", "projects", "cua.bin",
    "codex.approval_policy", "codex.max_approval_policy", "codex.sandbox", "codex.max_sandbox",
    "codex.approval_modes", "codex.fallback", "codex.approval_timeout_s", "codex.thread_ahead",
})
_LIVE_CODEX = tuple(k.split(".", 1)[1] for k in LIVE_KEYS if k.startswith("codex."))


@dataclass(frozen=True)
class Reload:
    config: Config  # the running config with the live keys taken from the new file
    applied: tuple[str, ...]  # live keys whose value changed
    needs_restart: tuple[str, ...]  # changed keys that only a restart applies


def plan_reload(running: Config, loaded: Config) -> Reload:
    """Which changed keys apply now, which wait for a restart; never touches values' text."""
    changed = [k.name for k in KEYS if config_value(running, k.name) != config_value(loaded, k.name)]
    if running.projects != loaded.projects:  # a table, not one of KEYS
        changed.append("projects")
    codex = replace(running.codex, **{name: getattr(loaded.codex, name) for name in _LIVE_CODEX})
    merged = replace(running, log_level=loaded.log_level, workspaces=loaded.workspaces,
                     workspaces_listed=loaded.workspaces_listed,
                     default_workdir=loaded.default_workdir, projects=loaded.projects,
                     cua_bin=loaded.cua_bin, codex=codex)
    return Reload(merged, tuple(k for k in changed if k in LIVE_KEYS),
                  tuple(k for k in changed if k not in LIVE_KEYS))


def log_reload(result: Reload) -> None:
    """Key names only: a value (a URL, a path) never reaches the log through a reload."""
    if result.applied:
        logger.info("configuration reloaded; applied to new tasks: %s", ", ".join(result.applied))
    else:
        logger.info("configuration reloaded; nothing that applies live changed")
    if result.needs_restart:
        logger.warning("changed but needs a restart to apply: %s", ", ".join(result.needs_restart))
