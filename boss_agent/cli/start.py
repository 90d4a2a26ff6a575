"""Starting the daemon from the command line: ``start_daemon``, shared by both doors.

``boss-agent run`` reaches the daemon either through ``cli/entry.py`` (a plain ``run``,
without typer) or through the typer app's ``run`` command. Both call this one function,
which lives apart from either so that neither door imports the other.
"""

from __future__ import annotations

import asyncio
from pathlib import Path


def start_daemon(config_path: str | Path | None) -> None:
    """Load the config, set up logging and run the daemon until SIGTERM/SIGINT."""
    from boss_agent.codexbin import require_codex
    from boss_agent.config import load_config
    from boss_agent.daemon.runtime import Daemon
    from boss_agent.logs import setup_logging

    config = load_config(config_path or None)
    require_codex(config.codex.bin)  # refuse at once: every task would fail without it
    setup_logging(config.log_level, config.state_dir / "logs")
    asyncio.run(Daemon(config).run())
