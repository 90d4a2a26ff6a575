"""`boss-agent capabilities [--json] [--refresh]` as a user runs it (real subprocesses):
the cached discovery and its age; ``--refresh`` starts the real codex app-server
(scripted model), runs discovery, saves it owner-only, and a later plain call reads
the same data from the cache without starting codex."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from typer.testing import Result

from tests.support.cli import invoke, isolated, run_cli



def cli(tmp_path: Path, *args: str, **extra: str) -> Result:
    """``capabilities`` in-process: only its output is looked at."""
    return invoke("capabilities", *args, env=isolated(tmp_path, **extra))


def test_without_a_discovery_it_says_how_to_get_one(tmp_path: Path) -> None:
    raw = cli(tmp_path, "--json")
    assert raw.exit_code == 0, raw.output
    assert json.loads(raw.stdout) == {"discovered": False}
    text = cli(tmp_path)
    assert "capabilities --refresh" in text.stdout


@pytest.mark.codex
def test_refresh_runs_discovery_saves_it_and_the_cache_serves_it_afterwards(
    tmp_path: Path, codex_bin: str, codex_release: str, codex_home: Path,
) -> None:
    fresh = cli(tmp_path, "--refresh", "--json", BOSS_CODEX_BIN=codex_bin, CODEX_HOME=str(codex_home))
    assert fresh.exit_code == 0, fresh.output
    data = json.loads(fresh.stdout)
    assert data["discovered"] is True and data["codexVersion"] == codex_release
    ids = [m["id"] for m in data["models"]]
    assert ids and data["defaultModel"] in ids and data["fastModel"] in ids and data["deepModel"] in ids
    assert isinstance(data["providerCapabilities"], dict)
    assert all(isinstance(data[key], list) for key in ("skills", "plugins", "apps"))
    cache = tmp_path / "state" / "discovery.json"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600
    assert stat.S_IMODE(cache.parent.stat().st_mode) == 0o700

    # No codex now: the plain command must read the cache, not start the app-server.
    cached = cli(tmp_path, "--json", BOSS_CODEX_BIN=str(tmp_path / "no-codex"))
    assert cached.exit_code == 0, cached.output
    again = json.loads(cached.stdout)
    assert [m["id"] for m in again["models"]] == ids and again["ageS"] >= 0
    text = cli(tmp_path, BOSS_CODEX_BIN=str(tmp_path / "no-codex")).stdout
    assert f"models ({len(ids)}):" in text and f"default: {data['defaultModel']}" in text
    assert str(tmp_path) not in fresh.stdout + text


def test_refresh_without_codex_is_one_line_and_exit_1(tmp_path: Path) -> None:
    # the real entry point: its exit code and what reaches stderr
    done = run_cli("capabilities", "--refresh", env=isolated(tmp_path, BOSS_CODEX_BIN=str(tmp_path / "no-codex")))
    assert done.returncode == 1
    assert done.stderr.strip().count("\n") == 0 and "Traceback" not in done.stderr
    assert "discovery failed" in done.stderr
