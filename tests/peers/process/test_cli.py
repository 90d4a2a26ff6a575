"""The command line as a user runs it: a real `python -m boss_agent` process (exit codes of the
real entry point), with a HOME of the test's own."""

from __future__ import annotations

import json
from pathlib import Path

from boss_agent import __version__
from tests.support.cli import cli_env, run_cli

def test_version_prints_the_package_version(tmp_path: Path) -> None:
    done = run_cli("--version", env=cli_env(tmp_path))
    assert done.returncode == 0
    assert done.stdout.strip() == f"boss-agent {__version__}"


def test_status_on_an_unpaired_machine_says_so_without_home_paths(tmp_path: Path, codex_bin: str,
                                                                  codex_release: str) -> None:
    done = run_cli("status", "--json", env=cli_env(tmp_path, **{"BOSS_CODEX_BIN": codex_bin}))
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["paired"] is False
    assert data["codexVersion"] == codex_release
    assert str(tmp_path) not in done.stdout


def test_doctor_reports_each_check_and_fails_without_codex(tmp_path: Path) -> None:
    done = run_cli("doctor", "--json", env=cli_env(tmp_path, **{"BOSS_CODEX_BIN": str(tmp_path / "nope")}))
    assert done.returncode == 1
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert checks["config"]["result"] == "ok"
    assert checks["codex"]["result"] == "fail"
    assert checks["codex"]["fix"]


def test_doctor_passes_its_codex_check_with_the_real_binary(tmp_path: Path, codex_bin: str,
                                                            codex_release: str) -> None:
    done = run_cli("doctor", env=cli_env(tmp_path, **{"BOSS_CODEX_BIN": codex_bin}))
    assert f"[ok  ] codex: codex {codex_release} (features: " in done.stdout


def test_a_malformed_config_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[codex]\napp_server_transport = 'carrier-pigeon'\n")
    done = run_cli("--config", str(bad), "status", env=cli_env(tmp_path))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "codex.app_server_transport" in lines[0]
    assert "Traceback" not in done.stderr


def test_unparseable_toml_is_also_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("this is = = not toml")
    done = run_cli("--config", str(bad), "status", env=cli_env(tmp_path))
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
