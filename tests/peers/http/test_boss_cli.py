"""`boss-agent pair`, `unpair` and `run` as a user types them (real subprocesses,
against the real ControlPlane): one-line errors, exit codes, no token in output."""

from __future__ import annotations

import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from boss_agent.controlplane import ControlPlane
from boss_agent.identity import load_identity
from tests.support.cli import isolated, run_cli_async

CLI_TIMEOUT_S = 60


@pytest.fixture
async def cp(tmp_path: Path) -> AsyncIterator[ControlPlane]:
    async with ControlPlane(tmp_path / "cp" / "boss.db") as plane:
        yield plane


async def cli(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    done = await run_cli_async(*args, env=isolated(tmp_path))
    return done.returncode, done.stdout, done.stderr


async def test_pair_prints_the_device_id_never_the_token_and_unpair_forgets_it(
    tmp_path: Path, cp: ControlPlane,
) -> None:
    code, out, err = await cli(tmp_path, "pair", cp.create_pairing_code(), "--server", cp.url)
    assert code == 0, err
    identity = load_identity(tmp_path / "state")
    assert identity is not None and identity.device_id in out
    assert identity.token not in out + err
    assert stat.S_IMODE((tmp_path / "state" / "device_token").stat().st_mode) == 0o600
    code, out, _ = await cli(tmp_path, "unpair")
    assert code == 0 and "unpaired" in out
    assert load_identity(tmp_path / "state") is None


async def test_an_invalid_pairing_code_is_one_line_on_stderr_and_exit_1(
    tmp_path: Path, cp: ControlPlane,
) -> None:
    code, out, err = await cli(tmp_path, "pair", "111-111", "--server", cp.url)
    assert code == 1 and out == ""
    assert err.strip().count("\n") == 0 and "pairing code is not valid" in err
    assert "Traceback" not in err


async def test_pair_without_a_server_is_a_usage_error(tmp_path: Path) -> None:
    # (`run` unpaired waits for pairing: tests/peers/codex/test_run_waits_for_pairing.py.)
    code, _, err = await cli(tmp_path, "pair", "111-111")
    assert code == 2 and "server" in err
