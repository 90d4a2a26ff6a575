"""Helpers for the runner tests: a recording TaskSink, configs, codex processes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psutil

from boss_agent.appserver.client import AppServer
from boss_agent.demo import scripted_model as sm
from boss_agent.progress.card import Card
from boss_agent.tasks import ApprovalRequest, SinkDefaults
from tests.support.config import make_config
from tests.support.waits import WAIT_S, eventually



def missing_app_server(tmp: Path, codex_bin: str) -> AppServer:
    """An app-server whose codex binary does not exist: every task reaches the fallbacks."""
    settings: dict[str, Any] = {"codex.bin": str(tmp / "no-such-codex")}
    broken = make_config(tmp / "broken", codex_bin, **settings)
    return AppServer.from_config(broken)


def sleepers(marker: str) -> list[psutil.Process]:
    """Processes whose command line contains ``marker`` (a command's unique sleep)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if marker in " ".join(proc.info["cmdline"] or []):
            found.append(proc)
    return found


def module_env(tmp: Path, model: sm.ScriptedModel, codex_bin: str, **overrides: Any) -> dict[str, Any]:
    """A module's shared set-up: a codex home on ``model`` and a permissive config.

    The device allows full access so each test can ask for the sandbox it needs.
    """
    home = sm.write_codex_home(tmp / "codex-home", model.base_url)
    config = make_config(tmp, codex_bin, **{"codex.sandbox": "danger-full-access",
                                            "codex.max_sandbox": "danger-full-access", **overrides})
    return {"tmp": tmp, "home": home, "config": config, "root": config.workspaces[0]}


class Sink(SinkDefaults):
    """Records every card and approval; answers approvals with ``decide``."""

    def __init__(self, decide: Callable[[ApprovalRequest], Awaitable[Any]] | None = None) -> None:
        self.cards: list[dict[str, Any]] = []
        self.approvals: list[ApprovalRequest] = []
        self.decide = decide
        self.changed = asyncio.Event()

    async def progress(self, card: Card) -> None:
        self.cards.append(card.to_dict())  # tests read every card, so serialize each here
        self.changed.set()

    async def request_approval(self, request: ApprovalRequest) -> Any:
        self.approvals.append(request)
        self.changed.set()
        if self.decide is None:
            return "decline"
        return await self.decide(request)

    def dumps(self) -> str:
        return json.dumps(self.cards)

    async def until(self, predicate: Callable[[], bool], timeout: float = WAIT_S) -> None:
        await eventually(predicate, timeout, changed=self.changed)
