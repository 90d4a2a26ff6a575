"""`run` and `up` refuse a codex below the supported range, through the real CLI process."""

from __future__ import annotations

from pathlib import Path

import pytest

from boss_agent.codexversion import NEWEST_TESTED, OLDEST_SUPPORTED, dotted, range_text
from tests.support.cli import isolated, run_cli

BELOW = dotted((OLDEST_SUPPORTED[0], OLDEST_SUPPORTED[1] - 1, 0))


def _stand_in(tmp_path: Path, version: str) -> str:
    fake = tmp_path / "codex"
    fake.write_text(f"#!/bin/sh\necho 'codex-cli {version}'\n")
    fake.chmod(0o755)
    return str(fake)


@pytest.mark.parametrize("command", [["run"], ["up", "--port", "0"]])
def test_run_and_up_refuse_a_codex_below_the_range_in_one_line_with_exit_2(
        tmp_path: Path, command: list[str]) -> None:
    done = run_cli(*command, env=isolated(tmp_path, BOSS_CODEX_BIN=_stand_in(tmp_path, BELOW)))
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"boss-agent: codex {BELOW} is older than boss-agent supports (codex {range_text()}); "
        f"upgrade it: npm install -g @openai/codex@{dotted(NEWEST_TESTED)}")
    assert not (tmp_path / "state" / "controlplane").exists()  # nothing started
