"""Capability discovery against the real codex, its on-disk cache and its TTL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from boss_agent.appserver.client import AppServer, RestartBackoff
from boss_agent.appserver.discovery import DiscoveryCache, load_cached, model_roles
from tests.support.appserver import codex_settings

TTL_MS = 60_000
SLOW_RESTART = RestartBackoff(initial_s=30, max_s=30, jitter_s=0)  # one attempt is all we need


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.codex
async def test_discovery_is_cached_on_disk_and_refreshed_after_its_ttl(
    codex_bin: str, codex_release: str, codex_home: Path, tmp_path: Path,
) -> None:
    clock = Clock()
    state = tmp_path / "state"
    cache = DiscoveryCache(state, TTL_MS, clock=clock, cwds=[tmp_path])
    async with AppServer(codex_settings(codex_bin), state_dir=state, codex_home=codex_home) as app:
        first = await cache.get(app)
        meta = first["metadata"]
        # The catalogue is the release's own: its default and roles come from its list.
        ids = [m["id"] for m in meta["models"]]
        assert [meta["defaultModel"]] == [m["id"] for m in meta["models"] if m["isDefault"]]
        assert "gpt-5.5" in ids and {meta["fastModel"], meta["deepModel"]} <= set(ids)
        # 0.150 also reports namespaceTools; both report these two.
        assert {"imageGeneration": True, "webSearch": True}.items() <= meta["providerCapabilities"].items()
        assert {"name": "imagegen"} in meta["skills"]
        assert meta["plugins"] == [] and meta["apps"] == []
        assert first["codexVersion"] == codex_release and "error" not in meta
        assert (state / "discovery.json").stat().st_mode & 0o777 == 0o600

        clock.now += TTL_MS / 1000 / 2
        assert (await cache.get(app))["savedAtMs"] == first["savedAtMs"]  # served from disk
        clock.now += TTL_MS / 1000
        refreshed = await cache.get(app)
        assert refreshed["savedAtMs"] > first["savedAtMs"]
        assert refreshed["metadata"]["models"] == meta["models"]
        forced = await cache.get(app, refresh=True)
        assert forced["savedAtMs"] == refreshed["savedAtMs"]  # same clock: rewritten, same time
    cached = load_cached(state)
    assert cached is not None and cached["metadata"]["defaultModel"] == meta["defaultModel"]
    assert isinstance(cached["ageMs"], int)


async def test_a_failed_discovery_keeps_the_last_good_data_and_reports_a_short_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    state = tmp_path / "state"
    missing = str(tmp_path / "no-such-codex")
    settings = codex_settings("codex", bin=missing)
    async with AppServer(settings, state_dir=state, restart_policy=SLOW_RESTART) as app:
        assert app.status["available"] is False and "codex CLI not found" in app.status["error"]
        empty = await DiscoveryCache(state, TTL_MS).get(app)
        assert empty["metadata"] == {"error": empty["metadata"]["error"]}
        assert "codex CLI not found" in empty["metadata"]["error"]

        good: dict[str, Any] = {"metadata": {"defaultModel": "m", "models": []},
                                "discoveredAt": "2026-11-29T10:00:00Z", "savedAtMs": 0}
        (state / "discovery.json").write_text(json.dumps(good))
        kept = await DiscoveryCache(state, TTL_MS).get(app)  # stale (savedAtMs 0): tries, fails
    assert kept["metadata"]["defaultModel"] == "m"
    assert "codex CLI not found" in kept["metadata"]["error"]
    assert len(kept["metadata"]["error"]) <= 160
    assert "capability discovery failed" in caplog.text


def test_model_roles_fall_back_to_the_default_when_nothing_hints_speed_or_depth() -> None:
    catalogue = [
        {"id": "alpha", "displayName": "Alpha", "isDefault": True, "hidden": False,
         "description": "General model.", "supportedReasoningEfforts": [{}, {}]},
        {"id": "beta", "displayName": "Beta", "hidden": False, "description": "Another one.",
         "supportedReasoningEfforts": [{}, {}, {}]},
        {"id": "secret-mini", "hidden": True, "description": "Hidden and fast."},
    ]
    roles = model_roles(catalogue)
    assert roles["defaultModel"] == "alpha"
    assert roles["fastModel"] == "alpha"  # the hidden mini model is never picked
    assert roles["deepModel"] == "beta"  # most reasoning efforts
    assert [m["id"] for m in roles["models"]] == ["alpha", "beta"]
    assert model_roles([])["defaultModel"] is None
