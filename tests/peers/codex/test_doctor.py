"""`boss-agent doctor` against real peers: the real codex app-server (scripted model),
a real ControlPlane on loopback (a revoked token, a closed port), a real
redis-server (and a port where none listens). Each check says ok / warn / fail and
gives a fix; any fail exits 1; a check that crashes is a failed check, never a
traceback.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from boss_agent.cli import doctor
from boss_agent.codexfeatures import detect
from boss_agent.codexversion import NEWEST_TESTED, dotted, range_text
from boss_agent.controlplane import ControlPlane
from boss_agent.identity import Identity, save_identity
from tests.support.ports import free_port
from tests.support.redis_process import RedisProcess
from tests.support.cli import isolated, run_cli_async, run_doctor

pytestmark = pytest.mark.codex


async def pair(env: dict[str, str], plane: ControlPlane) -> None:
    done = await run_cli_async("pair", plane.create_pairing_code(), "--server", plane.url, env=env)
    assert done.returncode == 0, done.stderr


async def test_a_paired_healthy_machine_passes_every_check_but_the_service(
    tmp_path: Path, plane: ControlPlane, codex_bin: str, codex_release: str, codex_home: Path,
    redis_server: RedisProcess,
) -> None:
    env = isolated(tmp_path, BOSS_CODEX_BIN=codex_bin, CODEX_HOME=str(codex_home),
                   BOSS_GATEWAY_ENABLED="true", BOSS_REDIS_URL=redis_server.url)
    await pair(env, plane)
    code, checks, out = await run_doctor(env)
    assert [c for c in checks.values() if c["result"] == "fail"] == []
    assert code == 0
    assert checks["codex"]["result"] == "ok" and checks["codex"]["fix"] == ""
    # The feature set of the release under test, each one either present or on a fallback.
    assert checks["codex"]["detail"].startswith(f"codex {codex_release} (features: turn_tag, turns_list, ")
    assert checks["app-server"]["result"] == "ok" and "stdio" in checks["app-server"]["detail"]
    assert checks["discovery"]["result"] == "ok" and "default model" in checks["discovery"]["detail"]
    assert checks["server"]["result"] == "ok" and "token accepted" in checks["server"]["detail"]
    assert checks["redis"]["result"] == "ok"
    assert checks["state dir"]["result"] == "ok"
    assert checks["service"]["result"] == "warn" and checks["service"]["fix"] == "boss-agent service install"
    assert not plane.tasks()  # doctor claimed nothing
    assert str(tmp_path / "home") not in out


async def test_a_revoked_token_fails_with_pair_again_and_exit_1(
    tmp_path: Path, plane: ControlPlane,
) -> None:
    env = isolated(tmp_path, BOSS_CODEX_BIN=str(tmp_path / "no-codex"))
    await pair(env, plane)
    plane.revoke_device(plane.devices()[0]["deviceId"])
    code, checks, _ = await run_doctor(env)
    assert code == 1
    assert checks["server"]["result"] == "fail" and "pair again" in checks["server"]["fix"]
    assert checks["codex"]["result"] == "fail" and "@openai/codex" in checks["codex"]["fix"]
    assert checks["app-server"]["result"] == "fail" and "not tried" in checks["app-server"]["detail"]


async def test_an_unreachable_server_and_a_silent_redis_fail_with_a_fix(tmp_path: Path) -> None:
    env = isolated(tmp_path, BOSS_CODEX_BIN=str(tmp_path / "no-codex"), BOSS_GATEWAY_ENABLED="true",
                   BOSS_REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")
    save_identity(tmp_path / "state", Identity(f"http://127.0.0.1:{free_port()}", "dev_1", "tok_x"))
    code, checks, _ = await run_doctor(env)
    assert code == 1
    assert checks["server"]["result"] == "fail" and "unreachable" in checks["server"]["detail"]
    assert checks["redis"]["result"] == "fail" and "gateway.enabled" in checks["redis"]["fix"]


def test_an_open_state_dir_or_token_file_fails_with_the_chmod_that_fixes_it(tmp_path: Path) -> None:
    config = doctor.load_config(None, overrides={"state_dir": str(tmp_path / "state")}, environ={})
    save_identity(config.state_dir, Identity("http://127.0.0.1:9", "dev_1", "tok_x"))
    assert doctor.check_state_dir(config)["result"] == "ok"
    (config.state_dir / "device_token").chmod(0o644)
    token = doctor.check_state_dir(config)
    assert token["result"] == "fail" and token["fix"].startswith("chmod 600 ")
    config.state_dir.chmod(0o755)
    state = doctor.check_state_dir(config)
    assert state["result"] == "fail" and state["fix"] == f"chmod 700 {config.state_dir}"


def _stand_in(tmp_path: Path, version: str) -> str:
    """A `codex` that only prints a version: the check reads nothing else before it decides."""
    fake = tmp_path / "codex"
    fake.write_text(f"#!/bin/sh\necho 'codex-cli {version}'\n")
    fake.chmod(0o755)
    return str(fake)


def test_a_codex_below_the_supported_range_fails_with_the_range_and_the_upgrade(tmp_path: Path) -> None:
    config = doctor.load_config(None, overrides={"codex.bin": _stand_in(tmp_path, "0.149.0")}, environ={})
    check = doctor.check_codex(config)
    assert check["result"] == "fail" and "0.149.0" in check["detail"] and range_text() in check["detail"]
    assert check["fix"] == f"npm install -g @openai/codex@{dotted(NEWEST_TESTED)}"


def test_a_codex_newer_than_tested_is_a_warning_not_a_failure(tmp_path: Path) -> None:
    newer = dotted((NEWEST_TESTED[0], NEWEST_TESTED[1] + 1, 0))
    config = doctor.load_config(None, overrides={"codex.bin": _stand_in(tmp_path, newer)}, environ={})
    check = doctor.check_codex(config)
    assert check["result"] == "warn" and newer in check["detail"]


def test_the_features_of_a_codex_binary_are_detected_once_and_cached_in_the_state_dir(
        tmp_path: Path, codex_bin: str, codex_release: str) -> None:
    first = detect(codex_bin, tmp_path)
    cache = tmp_path / "codex-features.json"
    assert first.version == codex_release and cache.is_file()
    key = next(iter(json.loads(cache.read_text())))
    # What the cache says is what a second call returns: the schema is not read again.
    cache.write_text(json.dumps({key: {**asdict(first), "turn_tag": not first.turn_tag}}))
    assert detect(codex_bin, tmp_path).turn_tag is not first.turn_tag


def test_a_check_that_crashes_is_reported_failed_not_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(_config: Any) -> dict[str, Any]:
        raise RuntimeError("boom")

    monkeypatch.setattr(doctor, "check_service", broken)
    monkeypatch.setenv("BOSS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("BOSS_CODEX_BIN", str(tmp_path / "no-codex"))
    monkeypatch.setenv("BOSS_AGENT_CONFIG", str(tmp_path / "config.toml"))
    (tmp_path / "config.toml").touch()
    checks = {c["name"]: c for c in doctor.run_checks(None)}
    assert checks["service"]["result"] == "fail"
    assert checks["service"]["detail"] == "check crashed: RuntimeError: boom"
    assert checks["config"]["result"] == "ok"


def test_a_bad_config_is_the_one_failed_check(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("max_concurrent_tasks = 0\n")
    checks = doctor.run_checks(bad)
    assert [c["name"] for c in checks] == ["config"]
    assert checks[0]["result"] == "fail" and "max_concurrent_tasks" in checks[0]["detail"]
