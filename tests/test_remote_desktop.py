"""Computer use that installs: the service unit carries the desktop session's display
variables, and `doctor` checks the desktop (the real cua-driver against a real Xvfb)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from boss_agent.config import load_config
from boss_agent.service.manager import Host
from boss_agent.service.plan import plan_install
from tests.test_doctor import base_env, run_doctor
from tests.test_runner_cua import desktop  # noqa: F401 - the Xvfb + openbox fixture

DESKTOP_VARS = {"DISPLAY": ":7", "XAUTHORITY": "/run/user/1234/gdm/Xauthority", "WAYLAND_DISPLAY": "wayland-0"}


def _unit(tmp_path: Path, environ: dict[str, str], platform: str = "linux") -> str:
    config_file = tmp_path / "config.toml"
    config_file.write_text(f'state_dir = "{tmp_path / "state"}"\n')
    config = load_config(config_file, environ={})
    host = Host(platform, tmp_path / "home", 1234, "tester",
                {"PATH": os.environ["PATH"], "XDG_CONFIG_HOME": str(tmp_path / "xdg"), **environ})
    plan = plan_install(config, system=False, host=host, linger_probe=lambda _user: True)
    return plan.files[0].content


def test_service_install_from_a_desktop_session_records_its_display_variables(tmp_path: Path) -> None:
    unit = _unit(tmp_path, DESKTOP_VARS)
    for name, value in DESKTOP_VARS.items():
        assert f"Environment={name}={value}" in unit, unit
    headless = _unit(tmp_path, {})
    assert "DISPLAY" not in headless


@pytest.mark.desktop
async def test_doctor_shows_the_cua_driver_healthy_on_a_real_display(
        tmp_path: Path, desktop: dict[str, str]) -> None:  # noqa: F811 - the imported fixture
    env = base_env(tmp_path, BOSS_CODEX_BIN=str(tmp_path / "no-codex"), DISPLAY=desktop["DISPLAY"])
    _code, checks, _out = await run_doctor(env)
    check = checks["desktop"]
    assert check["result"] == "ok", check
    assert "cua-driver" in check["detail"] and desktop["DISPLAY"] in check["detail"]


async def test_doctor_says_when_there_is_no_display_or_the_service_cannot_see_it(
        tmp_path: Path) -> None:
    env = {k: v for k, v in base_env(tmp_path, BOSS_CODEX_BIN=str(tmp_path / "no-codex")).items()
           if k not in DESKTOP_VARS}
    _code, checks, _out = await run_doctor(env)
    assert checks["desktop"]["result"] == "warn" and "no display" in checks["desktop"]["detail"]
    assert "desktop session" in checks["desktop"]["fix"]


@pytest.mark.desktop
async def test_doctor_warns_when_the_installed_service_has_no_display(
        tmp_path: Path, desktop: dict[str, str]) -> None:  # noqa: F811 - the imported fixture
    env = base_env(tmp_path, BOSS_CODEX_BIN=str(tmp_path / "no-codex"), DISPLAY=desktop["DISPLAY"])
    unit = tmp_path / "home" / ".config" / "systemd" / "user" / "boss-agent.service"
    unit.parent.mkdir(parents=True)
    unit.write_text(_unit(tmp_path, {}))  # installed from a shell without a desktop
    _code, checks, _out = await run_doctor(env)
    check = checks["desktop"]
    assert check["result"] == "warn" and "service" in check["detail"], check
    assert "boss-agent service install" in check["fix"]
