"""The one config builder for tests: no user file, no ``BOSS_*`` environment, state under ``tmp``.

Settings are the dotted keys of ``config.toml`` (``{"codex.sandbox": "read-only"}``) or,
to pass them as keywords, the same names with ``__`` for the dots (``codex__sandbox=...``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from boss_agent.config import Config, load_config

NO_CODEX = "/nonexistent/codex"  # a codex that does not exist: a test that runs it fails loudly


def make_config(tmp: Path, codex_bin: str | None = None, *, server_url: str | None = None,
                workspace: Path | None = None, **settings: Any) -> Config:
    """A config for a test; the one workspace is ``workspace`` or ``tmp/ws`` (created).

    ``codex_bin`` None keeps the config's own default (find codex); ``NO_CODEX`` makes
    running codex fail.

    ``grace_period_s`` is 0: only the tests of the grace period wait one out, and they set it.
    """
    root = workspace if workspace is not None else tmp / "ws"
    root.mkdir(parents=True, exist_ok=True)
    values: dict[str, Any] = {"state_dir": str(tmp / "state"), "workspaces": [str(root)], "grace_period_s": 0}
    if codex_bin is not None:
        values["codex.bin"] = codex_bin
    if server_url is not None:
        values["server.url"] = server_url
    values.update({key.replace("__", "."): value for key, value in settings.items()})
    return load_config(None, overrides=values, environ={})
