"""The generated systemd unit and launchd plist.

The unit is checked two ways: ``systemd-analyze verify`` (systemd 252 is installed
on this machine; the test says so and skips only that half when it is missing) and
a small parser that reads the keys back. ``verify`` accepts unknown keys with a
warning, so the tests fail on any warning on its stderr, not only on its exit code.

launchd cannot run here (it exists only on macOS): the plist is parsed with
``plistlib`` and its keys checked; loading it into launchd is a seam no real peer
reaches on this machine.
"""

from __future__ import annotations

import dataclasses
import os
import plistlib
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from boss_agent.config import load_config
from boss_agent.service import Host, plan_install
from boss_agent.service.units import (
    STOP_MARGIN_S,
    ServiceSpec,
    render_examples,
    render_launchd_plist,
    render_systemd_unit,
    systemd_quote,
)

REPO = Path(__file__).resolve().parents[2]
VERIFY_TIMEOUT_S = 60
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")


def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    """Sections -> key -> values (repeatable keys such as Environment= keep all)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for line in text.splitlines():
        if not line.strip() or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), defaultdict(list))
            continue
        assert current is not None, f"key outside a section: {line}"
        key, sep, value = line.partition("=")
        assert sep, f"not a key=value line: {line}"
        current[key].append(value)
    return sections


def unquote(word: str) -> str:
    """Inverse of systemd_quote for one word (enough for what we write)."""
    if word.startswith('"') and word.endswith('"'):
        word = word[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return word.replace("%%", "%").replace("$$", "$")


def environment(unit: dict[str, dict[str, list[str]]]) -> dict[str, str]:
    pairs = (unquote(value).split("=", 1) for value in unit["Service"]["Environment"])
    return {name: value for name, value in pairs}


@pytest.fixture
def config(tmp_path: Path, codex_bin: str):
    return load_config(environ={
        "BOSS_STATE_DIR": str(tmp_path / "state 100%"),  # a space and a % must survive
        "BOSS_CODEX_BIN": codex_bin,
        "BOSS_GRACE_PERIOD_S": "45",
    })


@pytest.fixture
def host(tmp_path: Path) -> Host:
    return Host("linux", tmp_path / "home", os.getuid(), "tester",
                {"PATH": os.environ["PATH"], "XDG_CONFIG_HOME": str(tmp_path / "xdg")})


def unit_text(config, host: Host, *, system: bool) -> str:
    plan = plan_install(config, system=system, host=host, linger_probe=lambda user: True)
    (written,) = plan.files
    return written.content


def systemd_verify(tmp_path: Path, text: str, *, user: bool) -> None:
    if SYSTEMD_ANALYZE is None:
        return  # this half needs systemd; the key checks below still run
    path = tmp_path / "verify" / "boss-agent.service"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700, exist_ok=True)
    args = [SYSTEMD_ANALYZE, "verify", *(["--user"] if user else []), str(path)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=VERIFY_TIMEOUT_S, check=False,
                          env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)})
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "", done.stderr  # unknown keys and bad values are warnings


def test_the_user_unit_passes_systemd_analyze_verify(tmp_path, config, host):
    systemd_verify(tmp_path, unit_text(config, host, system=False), user=True)


def test_the_system_unit_passes_systemd_analyze_verify(tmp_path, config, host):
    real_user = dataclasses.replace(host, user=os.environ.get("USER") or "root")
    systemd_verify(tmp_path, unit_text(config, real_user, system=True), user=False)


def test_the_user_unit_is_a_notify_service_with_watchdog_restart_limits_and_network_order(config, host):
    unit = parse_unit(unit_text(config, host, system=False))
    service, head = unit["Service"], unit["Unit"]
    assert service["Type"] == ["notify"] and service["NotifyAccess"] == ["main"]
    assert int(service["WatchdogSec"][0]) > 0
    assert service["Restart"] == ["on-failure"]
    assert int(head["StartLimitBurst"][0]) > 0 and int(head["StartLimitIntervalSec"][0]) > 0
    assert "network-online.target" in head["After"][0].split()
    assert "network-online.target" in head["Wants"][0].split()
    assert service["KillMode"] == ["mixed"]
    assert int(service["TimeoutStopSec"][0]) == 45 + STOP_MARGIN_S  # longer than the grace period
    assert unit["Install"]["WantedBy"] == ["default.target"]
    assert "User" not in service


def test_hardening_leaves_home_and_tmp_visible_to_codex(config, host):
    for system in (False, True):
        service = parse_unit(unit_text(config, host, system=system))["Service"]
        assert "ProtectHome" not in service and "PrivateTmp" not in service
        assert service["NoNewPrivileges"] == ["yes"]
        assert service.get("ProtectSystem", ["full"]) == ["full"]  # never "strict"


def test_the_unit_runs_this_boss_agent_with_a_path_that_finds_codex(config, host, codex_bin):
    service = parse_unit(unit_text(config, host, system=False))["Service"]
    argv = [unquote(word) for word in service["ExecStart"][0].split()]
    assert argv[-1] == "up"  # no server.url in this config: the page and the daemon
    assert argv[0] in (sys.executable, str(Path(sys.executable).parent / "boss-agent"))
    env = environment({"Service": service})
    assert str(Path(codex_bin).parent) in env["PATH"].split(os.pathsep)
    assert env["BOSS_STATE_DIR"] == str(config.state_dir.resolve())
    # A source checkout needs PYTHONPATH to import boss_agent under systemd.
    if argv[1:3] == ["-m", "boss_agent"]:
        assert Path(env["PYTHONPATH"], "boss_agent", "__init__.py").is_file()


def test_the_system_unit_runs_as_the_installing_user_for_multi_user_target(config, host):
    unit = parse_unit(unit_text(config, host, system=True))
    assert unit["Service"]["User"] == ["tester"]
    assert unit["Install"]["WantedBy"] == ["multi-user.target"]


def test_special_characters_in_arguments_are_escaped_for_systemd():
    assert systemd_quote("/a b/%h") == '"/a b/%%h"'
    assert systemd_quote("$HOME", exec_line=True) == "$$HOME"
    assert unquote(systemd_quote('say "hi" \\ 50%')) == 'say "hi" \\ 50%'
    with pytest.raises(ValueError):
        systemd_quote("two\nlines")


def test_the_launchd_plist_keeps_the_agent_alive_with_logs_in_the_state_dir(config, host, codex_bin):
    # launchd is macOS-only: the plist is parsed and checked, never loaded, on this machine.
    plan = plan_install(config, system=False, host=dataclasses.replace(host, platform="darwin"))
    plist = plistlib.loads(plan.files[0].content.encode())
    assert plist["Label"] == "com.boss.agent"
    assert plist["ProgramArguments"][-1] == "up"  # no server.url: the embedded default
    assert plist["RunAtLoad"] is True
    assert plist["KeepAlive"] == {"SuccessfulExit": False}
    assert plist["ThrottleInterval"] > 0
    assert plist["ExitTimeOut"] == 45 + STOP_MARGIN_S
    logs = config.state_dir.resolve() / "logs"
    assert Path(plist["StandardOutPath"]).parent == logs
    assert Path(plist["StandardErrorPath"]).parent == logs
    env = plist["EnvironmentVariables"]
    assert str(Path(codex_bin).parent) in env["PATH"].split(os.pathsep)
    assert env["BOSS_STATE_DIR"] == str(config.state_dir.resolve())
    assert "UserName" not in plist


def test_a_launch_daemon_names_the_user_it_runs_as():
    spec = ServiceSpec(argv=("/bin/boss-agent", "run"), system=True, user="tester")
    assert plistlib.loads(render_launchd_plist(spec).encode())["UserName"] == "tester"


def test_the_hand_install_examples_in_the_repository_match_the_templates():
    for relative, expected in render_examples().items():
        assert (REPO / relative).read_text() == expected, (
            f"{relative} is stale: regenerate it from boss_agent.service.units.render_examples()"
        )


def test_the_example_unit_passes_systemd_analyze_verify(tmp_path):
    text = render_systemd_unit(dataclasses.replace(
        ServiceSpec(argv=(sys.executable, "-m", "boss_agent", "run")), grace_period_s=30))
    systemd_verify(tmp_path, text, user=True)
    assert parse_unit((REPO / "systemd" / "boss-agent.service").read_text())["Service"]["Type"] == ["notify"]
