"""The ``[projects]`` table: project id -> directory, ids checked, paths resolved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from boss_agent.config import load_config
from boss_agent.errors import ConfigError



def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_the_projects_table_maps_ids_to_resolved_directories(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, f'[projects]\nweb = "{tmp_path}/web"\n"api.v2" = "~/api"\n'),
                         environ={})
    assert config.projects == {"web": tmp_path / "web", "api.v2": Path.home() / "api"}


def test_no_projects_table_means_no_projects(tmp_path: Path) -> None:
    assert load_config(_write(tmp_path, ""), environ={}).projects == {}


@pytest.mark.parametrize("table", ['"a:b" = "/tmp"', '"../x" = "/tmp"', 'web = 3', 'web = ""'])
def test_a_project_id_that_could_reach_another_key_or_a_non_path_is_refused(
        tmp_path: Path, table: str) -> None:
    with pytest.raises(ConfigError, match="projects"):
        load_config(_write(tmp_path, f"[projects]\n{table}\n"), environ={})


def test_status_of_a_stopped_gateway_only_device_shows_its_gateway_without_touching_redis(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from boss_agent.cli.status import collect_status
    from boss_agent.cli.support import render_pairs

    config = load_config(_write(tmp_path, f'state_dir = "{tmp_path}/state"\n[gateway]\nenabled = true\n'
                                          f'redis_url = "redis://127.0.0.1:1/0"\n[projects]\nweb = "{tmp_path}"\n'
                                          f'[codex]\nbin = "{tmp_path}/no-codex"\n'),  # no process started
                         environ={})
    status = collect_status(config)
    render_pairs(status)
    printed = capsys.readouterr().out
    assert status["gateway"] == {"redisUrl": "redis://127.0.0.1:1/0", "agentTypes": ["boss_local_agent"],
                                 "group": "agent_engines", "gatewayOnly": True, "projects": ["web"]}
    assert any(line.split() == ["gateway.gatewayOnly", "yes"] for line in printed.splitlines())
    assert str(tmp_path) not in json.dumps(status["gateway"])
