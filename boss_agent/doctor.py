"""`boss-agent doctor`: each check says ok / warn / fail and, when not ok, a one-line fix.

Checks never raise: a check that cannot run is itself a failed check.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import Any

from boss_agent.codexbin import codex_version, find_codex
from boss_agent.config import Config, load_config
from boss_agent.errors import BossAgentError

Check = dict[str, Any]


def _check(name: str, result: str, detail: str, fix: str = "") -> Check:
    return {"name": name, "result": result, "detail": detail, "fix": fix}


def check_codex(config: Config) -> Check:
    try:
        path = find_codex(config.codex.bin)
        return _check("codex", "ok", f"codex {codex_version(path)}")
    except BossAgentError as exc:
        return _check("codex", "fail", str(exc), "npm install -g @openai/codex, or set codex.bin")


def check_state_dir(config: Config) -> Check:
    path = config.state_dir
    if not path.exists():
        return _check("state dir", "warn", "not created yet", "it is created on first `run` or `pair`")
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        return _check("state dir", "fail", f"permissions {mode:o} let others read it",
                      f"chmod 700 {path}")
    if not os.access(path, os.W_OK):
        return _check("state dir", "fail", "not writable", f"check the owner of {path}")
    return _check("state dir", "ok", f"permissions {mode:o}")


def check_server(config: Config) -> Check:
    if not config.server_url:
        return _check("server", "warn", "no server configured (not paired)",
                      "boss-agent pair CODE --server URL, or boss-agent up")
    return _check("server", "ok", config.server_url)


CHECKS: tuple[Callable[[Config], Check], ...] = (check_codex, check_state_dir, check_server)


def run_checks(config_path: str | None) -> list[Check]:
    try:
        config = load_config(config_path)
    except BossAgentError as exc:
        return [_check("config", "fail", str(exc), "fix the key named above (see config.example.toml)")]
    results = [_check("config", "ok", str(config.config_path or "defaults (no config file)"))]
    for check in CHECKS:
        try:
            results.append(check(config))
        except Exception as exc:  # a broken check is reported, never a traceback
            results.append(_check(check.__name__.removeprefix("check_"), "fail",
                                  f"check crashed: {exc.__class__.__name__}"))
    return results
