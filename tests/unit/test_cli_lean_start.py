"""Which command lines take ``boss-agent run``'s lean start (cli/entry.py): a plain ``run``
with the root options before it; everything else goes through typer."""

from __future__ import annotations

import pytest

from boss_agent.cli.entry import run_options


@pytest.mark.parametrize(("argv", "expected"), [
    (["run"], (None, False)),
    (["--config", "/c.toml", "run"], ("/c.toml", False)),
    (["--config=/c.toml", "--debug", "run"], ("/c.toml", True)),
    (["--config", "run", "run"], ("run", False)),  # the option's value, then the command
    (["run", "--help"], None),
    (["--version"], None),
    (["--config"], None),
    (["status"], None),
    (["--verbose", "run"], None),  # typer says what is wrong with an unknown option
    ([], None),
])
def test_only_a_plain_run_takes_the_lean_start(argv: list[str], expected: tuple[str | None, bool] | None) -> None:
    assert run_options(argv) == expected


