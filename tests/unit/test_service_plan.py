"""`service install|uninstall|status`: plans, dry-run output, apply, lingering, status.

No test here enables a real service: plans are built for a Host whose home and
XDG_CONFIG_HOME are temp dirs, and ``apply`` runs hand-built plans of harmless real
commands. logind does not run on this machine, so the lingering answer comes from
a stand-in ``loginctl`` script put first on PATH (said again at that test).
"""

from __future__ import annotations

import json
import os
import stat
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from boss_agent.config import load_config
from boss_agent.errors import ServiceError
from boss_agent.service import (
    Host,
    InstallPlan,
    MakeDir,
    RemoveFile,
    RunCommand,
    WriteFile,
    apply,
    lingering_enabled,
    plan_install,
    plan_uninstall,
    service_status,
)
from boss_agent.cli.service import logs_command, service_app
from boss_agent.service.manager import parse_linger

SECRETS = {
    "BOSS_DEVICE_TOKEN": "bdt_live_0123456789abcdef",
    "OPENAI_API_KEY": "sk-proj-abcdefghijklmnop",
    "BOSS_CODEX_APP_SERVER_AUTH_TOKEN": "capability-9f8e7d6c5b4a",
}
TOKEN_FILE_CONTENT = "codex-capability-token-a1b2c3d4"


@pytest.fixture
def config(tmp_path: Path, codex_bin: str):
    token_file = tmp_path / "app-server.token"
    token_file.write_text(TOKEN_FILE_CONTENT)
    config_file = tmp_path / "config.toml"
    config_file.write_text(
        f'state_dir = "{tmp_path / "state"}"\n[codex]\nbin = "{codex_bin}"\n'
        f'app_server_transport = "ws"\napp_server_auth_token_file = "{token_file}"\n'
    )
    return load_config(config_file, environ={})


@pytest.fixture
def host(tmp_path: Path) -> Host:
    environ = {"PATH": os.environ["PATH"], "XDG_CONFIG_HOME": str(tmp_path / "xdg"), **SECRETS}
    return Host("linux", tmp_path / "home", 1234, "tester", environ)


def never_lingers(user: str) -> bool:
    return False


def test_the_dry_run_lists_the_unit_with_its_content_and_every_command(config, host, tmp_path):
    plan = plan_install(config, system=False, host=host, linger_probe=never_lingers)
    text = plan.render()
    unit_path = tmp_path / "xdg" / "systemd" / "user" / "boss-agent.service"
    assert plan.service_file == unit_path
    assert f"write {unit_path} (mode 0644):" in text
    assert "    | Type=notify" in text
    for line in ("run: systemctl --user daemon-reload", "run: systemctl --user enable boss-agent.service",
                 "run: systemctl --user restart boss-agent.service"):
        assert line in text
    assert "loginctl enable-linger tester" in text  # lingering is off in this plan


def test_the_dry_run_contains_no_secret_from_the_environment_or_the_token_files(config, host):
    for platform in ("linux", "darwin"):
        for system in (False, True):
            target = Host(platform, host.home, host.uid, host.user, host.environ)
            text = plan_install(config, system=system, host=target, linger_probe=never_lingers).render()
            for secret in (*SECRETS.values(), TOKEN_FILE_CONTENT):
                assert secret not in text
            assert "BOSS_DEVICE_TOKEN" not in text and "OPENAI_API_KEY" not in text


def test_service_install_dry_run_on_the_command_line_prints_files_and_commands_only(config, tmp_path):
    env = {**SECRETS, "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    result = CliRunner().invoke(service_app, ["install", "--dry-run", "--config", str(config.config_path)],
                                env=env)
    assert result.exit_code == 0, result.output
    assert "boss-agent.service (mode 0644):" in result.output
    assert "run: systemctl --user enable boss-agent.service" in result.output
    assert not any(secret in result.output for secret in (*SECRETS.values(), TOKEN_FILE_CONTENT))
    assert not (tmp_path / "xdg").exists()  # a dry run writes nothing


def test_a_bad_config_is_one_line_and_exit_code_2(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("max_concurrent_tasks = 0\n")
    result = CliRunner().invoke(service_app, ["install", "--dry-run", "--config", str(bad)])
    assert result.exit_code == 2
    assert "max_concurrent_tasks" in result.output


def test_a_system_install_uses_systemctl_without_user_and_skips_the_lingering_check(config, host):
    probed: list[str] = []
    plan = plan_install(config, system=True, host=host, linger_probe=lambda user: probed.append(user))
    assert plan.service_file == Path("/etc/systemd/system/boss-agent.service")
    assert [c.argv for c in plan.commands] == [
        ("systemctl", "daemon-reload"),
        ("systemctl", "enable", "boss-agent.service"),
        ("systemctl", "restart", "boss-agent.service"),
    ]
    assert probed == []


def test_a_macos_install_bootstraps_the_agent_into_the_gui_domain(config, host):
    mac = Host("darwin", host.home, 501, "tester", host.environ)
    plan = plan_install(config, system=False, host=mac)
    plist = host.home / "Library" / "LaunchAgents" / "com.boss.agent.plist"
    assert plan.service_file == plist
    assert MakeDir(config.state_dir.resolve() / "logs") in plan.steps
    assert [c.argv for c in plan.commands] == [
        ("launchctl", "bootout", "gui/501/com.boss.agent"),
        ("launchctl", "enable", "gui/501/com.boss.agent"),
        ("launchctl", "bootstrap", "gui/501", str(plist)),
    ]
    assert plan.commands[0].check is False  # nothing to unload on a first install


def test_uninstall_stops_disables_and_removes_the_unit(config, host):
    plan = plan_uninstall(config, system=False, host=host)
    assert plan.steps[0] == RunCommand(("systemctl", "--user", "disable", "--now", "boss-agent.service"),
                                       check=False)
    assert RemoveFile(plan.service_file) in plan.steps
    assert ("systemctl", "--user", "daemon-reload") in [c.argv for c in plan.commands]
    mac = plan_uninstall(config, system=False, host=Host("darwin", host.home, 501, "t", {}))
    assert [c.argv for c in mac.commands] == [("launchctl", "bootout", "gui/501/com.boss.agent")]


def test_apply_writes_files_creates_directories_runs_commands_and_removes_files(tmp_path):
    target = tmp_path / "deep" / "unit.service"
    marker = tmp_path / "ran"
    stale = tmp_path / "stale"
    stale.write_text("old")
    plan = InstallPlan("install", "linux", False, target, (
        MakeDir(tmp_path / "logs"),
        WriteFile(target, "[Unit]\n", 0o644),
        RunCommand((sys.executable, "-c", f"open({str(marker)!r}, 'w').write('yes')")),
        RunCommand((sys.executable, "-c", "raise SystemExit(3)"), check=False),
        RemoveFile(stale),
    ))
    apply(plan)
    assert target.read_text() == "[Unit]\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "logs").stat().st_mode) == 0o700
    assert marker.read_text() == "yes"
    assert not stale.exists()
    assert sorted(p.name for p in target.parent.iterdir()) == ["unit.service"]  # no temp file left


def test_apply_stops_at_the_first_failing_command_with_a_clear_sanitized_error(tmp_path):
    later = tmp_path / "later"
    plan = InstallPlan("install", "linux", False, later, (
        RunCommand((sys.executable, "-c", "import sys; sys.stderr.write('bad token=hunter22'); sys.exit(4)")),
        WriteFile(later, "never"),
    ))
    with pytest.raises(ServiceError) as failed:
        apply(plan)
    assert "exit 4" in str(failed.value)
    assert "hunter22" not in str(failed.value)
    assert not later.exists()


def test_apply_reports_a_missing_service_manager_as_a_service_error(tmp_path):
    plan = InstallPlan("install", "linux", False, tmp_path / "x", (
        RunCommand(("/nonexistent/systemctl", "daemon-reload")),))
    with pytest.raises(ServiceError, match="daemon-reload"):
        apply(plan)


@pytest.mark.parametrize(
    ("output", "expected"),
    [("Linger=yes\n", True), ("Linger=no\n", False), ("Name=me\n", None), ("", None)],
)
def test_lingering_is_read_from_loginctl_show_user_output(output, expected):
    assert parse_linger(output) is expected


def _fake_loginctl(directory: Path, script: str) -> str:
    """logind is not running on this machine: a stand-in loginctl answers instead."""
    directory.mkdir()
    path = directory / "loginctl"
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)
    return f"{directory}{os.pathsep}{os.environ['PATH']}"


def test_install_warns_when_loginctl_says_lingering_is_off(config, host, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", _fake_loginctl(tmp_path / "bin", 'echo "Linger=no"'))
    assert lingering_enabled("tester") is False
    plan = plan_install(config, system=False, host=host)
    assert any("lingering is off for tester" in w for w in plan.warnings)


def test_install_does_not_warn_when_lingering_is_on(config, host, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", _fake_loginctl(tmp_path / "bin", 'echo "Linger=yes"'))
    plan = plan_install(config, system=False, host=host)
    assert not any("linger" in w for w in plan.warnings)


def test_install_says_it_cannot_tell_when_loginctl_gives_no_answer(config, host, tmp_path, monkeypatch):
    no_bus = "echo 'Failed to connect to bus' >&2; exit 1"
    monkeypatch.setenv("PATH", _fake_loginctl(tmp_path / "bin", no_bus))
    assert lingering_enabled("tester") is None
    plan = plan_install(config, system=False, host=host)
    assert any("cannot tell whether lingering is on" in w for w in plan.warnings)


def test_service_status_reports_the_file_and_unknown_manager_state_without_raising(config, host):
    status = service_status(config, host=host)
    assert status["installed"] is False and status["daemon_pid"] is None
    assert status["manager"] == "systemd" and status["scope"] == "user"
    assert set(status) >= {"enabled", "active", "lingering", "service_file"}
    apply(InstallPlan("install", "linux", False, Path(status["service_file"]),
                      (WriteFile(Path(status["service_file"]), "[Unit]\n"),)))
    assert service_status(config, host=host)["installed"] is True


def test_an_unsupported_platform_is_a_clear_service_error(config):
    with pytest.raises(ServiceError, match="win32"):
        plan_install(config, system=False, platform="win32")


def test_service_status_json_on_the_command_line_parses(config, tmp_path):
    result = CliRunner().invoke(service_app, ["status", "--json", "--config", str(config.config_path)],
                                env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    assert result.exit_code == 0, result.output
    status = json.loads(result.output)
    assert status["installed"] is False and status["daemon_pid"] is None


def test_service_uninstall_dry_run_on_the_command_line_changes_nothing(config, tmp_path):
    result = CliRunner().invoke(service_app, ["uninstall", "--dry-run", "--config", str(config.config_path)],
                                env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    assert result.exit_code == 0, result.output
    assert "run: systemctl --user disable --now boss-agent.service" in result.output
    assert f"remove {tmp_path / 'xdg' / 'systemd' / 'user' / 'boss-agent.service'}" in result.output


def test_the_logs_command_prints_the_rendered_log(config):
    app = typer.Typer()
    app.command("logs")(logs_command)
    app.command("unused")(lambda: None)  # two commands, so typer keeps "logs" as a subcommand
    log = config.state_dir / "logs" / "boss-agent.log"
    log.parent.mkdir(parents=True)
    log.write_text('{"ts": "t", "level": "info", "logger": "boss_agent.d", "msg": "claimed a task"}\n')
    result = CliRunner().invoke(app, ["logs", "--config", str(config.config_path)])
    assert result.exit_code == 0, result.output
    assert result.output == "t INFO    boss_agent.d: claimed a task\n"


def unit_text(plan: InstallPlan) -> str:
    return next(step.content for step in plan.steps if isinstance(step, WriteFile))


def test_without_a_server_url_the_service_runs_up_so_the_page_survives_a_reboot(config, host):
    plan = plan_install(config, system=False, host=host, linger_probe=never_lingers)
    exec_start = next(line for line in unit_text(plan).splitlines() if line.startswith("ExecStart="))
    assert exec_start.endswith(" up"), exec_start
    assert not any("pair" in w for w in plan.warnings)  # up pairs with its own control plane
    served = replace(config, server_url="https://boss.example")
    plan = plan_install(served, system=False, host=host, linger_probe=never_lingers)
    exec_start = next(line for line in unit_text(plan).splitlines() if line.startswith("ExecStart="))
    assert exec_start.endswith(" run"), exec_start


def test_install_warns_when_the_device_is_not_paired_and_not_once_it_is(config, host):
    from boss_agent.identity import Identity, save_identity

    config = replace(config, server_url="https://boss.example")
    plan = plan_install(config, system=False, host=host)
    assert any("not paired" in w and "boss-agent pair" in w for w in plan.warnings)
    (config.state_dir).mkdir(parents=True, exist_ok=True)
    (config.state_dir / "device.json").write_text("{damaged")
    (config.state_dir / "device_token").write_text("tok")
    plan = plan_install(config, system=False, host=host)
    assert any("damaged" in w and "boss-agent pair" in w for w in plan.warnings)
    save_identity(config.state_dir, Identity("http://127.0.0.1:9", "dev_1", "tok"))
    plan = plan_install(config, system=False, host=host)
    assert not any("pair" in w for w in plan.warnings)
