"""Configuration: precedence, validation, and the example file."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from boss_agent.config import KEYS, KEYS_BY_NAME, _flatten, load_config
from boss_agent.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_defaults_load_without_any_file(tmp_path: Path) -> None:
    config = load_config(environ={"HOME": str(tmp_path)}, overrides={"state_dir": str(tmp_path)})
    assert config.max_concurrent_tasks == 2
    assert config.codex.app_server_transport == "stdio"
    assert config.codex.fallback == ("exec", "cua")
    assert config.gateway.enabled is False


def test_environment_overrides_the_file_and_flags_override_both(tmp_path: Path) -> None:
    path = write(tmp_path, "max_concurrent_tasks = 3\n[codex]\nsandbox = 'read-only'\n")
    config = load_config(path, environ={"BOSS_MAX_CONCURRENT_TASKS": "5"})
    assert config.max_concurrent_tasks == 5
    assert config.codex.sandbox == "read-only"
    config = load_config(path, environ={"BOSS_MAX_CONCURRENT_TASKS": "5"},
                         overrides={"max_concurrent_tasks": 7})
    assert config.max_concurrent_tasks == 7


def test_config_file_can_come_from_the_environment_variable(tmp_path: Path) -> None:
    path = write(tmp_path, "[gateway]\nenabled = true\nagent_types = ['a', 'b']\n")
    config = load_config(environ={"BOSS_AGENT_CONFIG": str(path)})
    assert config.gateway.enabled is True
    assert config.gateway.agent_types == ("a", "b")


def test_workspaces_from_the_environment_are_split_and_resolved(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    config = load_config(environ={"BOSS_WORKSPACES": f"{a}:{b}"})
    assert config.workspaces == (a.resolve(), b.resolve())


@pytest.mark.parametrize(
    ("text", "environ", "names"),
    [
        ("max_concurrent_tasks = 'many'\n", {}, "max_concurrent_tasks"),
        ("max_concurrent_tasks = 0\n", {}, "max_concurrent_tasks"),
        ("[codex]\napp_server_transport = 'pigeon'\n", {}, "codex.app_server_transport"),
        ("[codex]\nsandbox = 'danger-full-access'\n", {}, "codex.sandbox"),
        ("[server]\nurl = 'ftp://x'\n", {}, "server.url"),
        ("[codex]\nnot_a_key = 1\n", {}, "codex.not_a_key"),
        ("", {"BOSS_GATEWAY_ENABLED": "perhaps"}, "gateway.enabled"),
        ("max_concurrent_tasks = [\n", {}, "not valid TOML"),
        # Ids the gateway protocol would refuse fail at load, never in a supervisor's retry loop.
        ("[gateway]\nagent_types = ['bad id!']\n", {}, "gateway.agent_types"),
        ("[gateway]\nagent_types = []\n", {}, "gateway.agent_types"),
        ("", {"BOSS_GATEWAY_WORKER_ID": "x y"}, "gateway.worker_id"),
        ("[gateway]\nworker_id = 'a..b'\n", {}, "gateway.worker_id"),
    ],
)
def test_a_bad_value_names_the_key_in_one_line(tmp_path: Path, text: str, environ: dict[str, str],
                                                names: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text), environ=environ)
    message = str(info.value)
    assert names in message
    assert "\n" not in message


def test_a_missing_explicit_config_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "absent.toml", environ={})


def test_the_example_file_documents_every_key_and_loads_as_the_defaults(tmp_path: Path) -> None:
    example = (REPO / "config.example.toml").read_text()
    uncommented = re.sub(r"^# (\w[\w.]* = )", r"\1", example, flags=re.MULTILINE)
    documented = set(_flatten(tomllib.loads(uncommented)))
    # Keys documented under a [section] table are dotted by _flatten; the [projects]
    # table's keys are the owner's own project ids, shown by one example.
    projects = {name for name in documented if name.startswith("projects.")}
    assert projects, "the [projects] table is documented"
    documented -= projects
    assert documented == set(KEYS_BY_NAME), documented ^ set(KEYS_BY_NAME)
    config = load_config(write(tmp_path, example), environ={})
    for key in KEYS:
        if key.default is not None and "." in key.name and not key.name.startswith("server"):
            section, name = key.name.split(".", 1)
            value = getattr(getattr(config, section, None) or config, name, None)
            if value is not None:
                assert value == key.default, key.name


def test_every_key_has_an_environment_variable() -> None:
    assert all(key.env and key.env.startswith("BOSS_") for key in KEYS)


def test_the_projects_table_maps_ids_to_expanded_paths(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, '[projects]\napp = "~/src/app"\n"team.web" = "/srv/web"\n'),
                         environ={})
    assert config.projects == {"app": Path("~/src/app").expanduser(), "team.web": Path("/srv/web")}
    assert load_config(environ={}).projects == {}


@pytest.mark.parametrize("text", ['projects = "~/src"\n', '[projects]\napp = 3\n', '[projects]\napp = ""\n'])
def test_a_bad_projects_table_is_a_config_error(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError, match="projects"):
        load_config(write(tmp_path, text), environ={})


def test_default_workdir_and_the_approval_cap_default_safely(tmp_path: Path) -> None:
    config = load_config(environ={"BOSS_DEFAULT_WORKDIR": str(tmp_path)})
    assert config.default_workdir == tmp_path
    assert config.codex.max_approval_policy == "on-request"
    assert config.workspaces_listed is False


@pytest.mark.parametrize("listen", ["0.0.0.0:9464", "192.168.1.5:9464", "[::]:9464", "metrics.example.com:9464"])
def test_metrics_listen_on_anything_but_loopback_is_a_config_error(listen: str) -> None:
    with pytest.raises(ConfigError, match=r"metrics\.listen .*not loopback"):
        load_config(overrides={"metrics.listen": listen}, environ={})


@pytest.mark.parametrize(("listen", "parsed"), [("127.0.0.1:9464", ("127.0.0.1", 9464)),
                                                ("[::1]:9464", ("::1", 9464)),
                                                ("localhost:1", ("localhost", 1))])
def test_metrics_listen_takes_a_loopback_address_and_port(listen: str, parsed: tuple[str, int]) -> None:
    assert load_config(environ={"BOSS_METRICS_LISTEN": listen}).metrics_listen == parsed


def test_without_metrics_listen_the_daemon_never_imports_prometheus_client() -> None:
    """Idle cost: a quiet device does not pay for the metrics library it does not use."""
    code = ("import sys, boss_agent.daemon.runtime, boss_agent.sources.gateway, boss_agent.cli.app; "
            "sys.exit('prometheus_client' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO, check=False).returncode == 0
