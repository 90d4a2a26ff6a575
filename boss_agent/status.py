"""`boss-agent status`: what a user needs to know, read from files, no daemon round trip.

Everything comes from the config and the small files the daemon keeps in its state
dir, so status works whether or not the daemon runs and never blocks on the network.
"""

from __future__ import annotations

from typing import Any

from boss_agent.codexbin import codex_version, find_codex
from boss_agent.config import Config
from boss_agent.errors import AppServerError
from boss_agent.progress.sanitize import relativize_paths


def codex_facts(config: Config) -> dict[str, Any]:
    try:
        path = find_codex(config.codex.bin)
        return {"codexVersion": codex_version(path), "codexTransport": config.codex.app_server_transport}
    except AppServerError as exc:
        return {"codexVersion": None, "codexTransport": config.codex.app_server_transport,
                "codexError": str(exc)}


def collect_status(config: Config) -> dict[str, Any]:
    data: dict[str, Any] = {
        "server": config.server_url,
        "stateDir": relativize_paths(str(config.state_dir)),
        "paired": False,
        "deviceId": None,
        "daemon": "not running",
    }
    data.update(codex_facts(config))
    return data
