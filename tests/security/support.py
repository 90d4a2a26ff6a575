"""Shared set-up for the security regression tests: hostile tasks against real codex."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from boss_agent.appserver.client import AppServer
from boss_agent.tasks import Task, parse_task
from tests.runner_support import make_config


def missing_app_server(tmp: Path, codex_bin: str) -> AppServer:
    """An app-server whose codex binary does not exist: every task reaches the fallbacks."""
    broken = make_config(tmp / "broken", codex_bin, **{"codex.bin": str(tmp / "no-such-codex")})
    return AppServer.from_config(broken)


def hostile(**fields: Any) -> Task:
    """A task as every source builds it: through ``parse_task`` from wire fields."""
    return parse_task({"taskId": "t-hostile", "prompt": "do it", **fields})
