"""`boss-agent status` with no state file asks codex itself for its version."""

from __future__ import annotations

from pathlib import Path

import pytest

from boss_agent.cli.status import collect_status
from tests.support.config import NO_CODEX, make_config


def test_without_a_state_file_the_codex_version_is_asked_from_codex(
        tmp_path: Path, codex_bin: str, codex_release: str, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))  # codex runs with a HOME of the test's own
    assert collect_status(make_config(home, codex_bin))["codexVersion"] == codex_release
    missing = collect_status(make_config(home, NO_CODEX))
    assert missing["codexVersion"] is None and "not found" in missing["codexError"]
