"""The command line as a user runs it: a real `python -m boss_agent` process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from boss_agent import __version__

REPO = Path(__file__).resolve().parents[2]
CLI_TIMEOUT_S = 60


def run_cli(*args: str, env: dict[str, str] | None = None, home: Path) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("BOSS_")}
    base.update({"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
                 "XDG_STATE_HOME": str(home / ".state"), "PYTHONPATH": str(REPO)})
    base.update(env or {})
    return subprocess.run([sys.executable, "-m", "boss_agent", *args], capture_output=True, text=True,
                          env=base, timeout=CLI_TIMEOUT_S, check=False)


def test_version_prints_the_package_version(tmp_path: Path) -> None:
    done = run_cli("--version", home=tmp_path)
    assert done.returncode == 0
    assert done.stdout.strip() == f"boss-agent {__version__}"


def test_status_on_an_unpaired_machine_says_so_without_home_paths(tmp_path: Path, codex_bin: str) -> None:
    done = run_cli("status", "--json", env={"BOSS_CODEX_BIN": codex_bin}, home=tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["paired"] is False
    assert data["codexVersion"] == "0.171.0"
    assert str(tmp_path) not in done.stdout


def test_doctor_reports_each_check_and_fails_without_codex(tmp_path: Path) -> None:
    done = run_cli("doctor", "--json", env={"BOSS_CODEX_BIN": str(tmp_path / "nope")}, home=tmp_path)
    assert done.returncode == 1
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert checks["config"]["result"] == "ok"
    assert checks["codex"]["result"] == "fail"
    assert checks["codex"]["fix"]


def test_doctor_passes_its_codex_check_with_the_real_binary(tmp_path: Path, codex_bin: str) -> None:
    done = run_cli("doctor", env={"BOSS_CODEX_BIN": codex_bin}, home=tmp_path)
    assert "[ok  ] codex: codex 0.171.0" in done.stdout


def test_a_malformed_config_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[codex]\napp_server_transport = 'carrier-pigeon'\n")
    done = run_cli("--config", str(bad), "status", home=tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "codex.app_server_transport" in lines[0]
    assert "Traceback" not in done.stderr


def test_unparseable_toml_is_also_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("this is = = not toml")
    done = run_cli("--config", str(bad), "status", home=tmp_path)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
