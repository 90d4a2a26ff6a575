"""The CLI's one error boundary (``cli_support``) and the root options every command
shares, including the mounted `service` commands: `boss-agent --config X service …`
reads X; errors are one line, exit 2 for config, 1 otherwise, a traceback only with
--debug."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from boss_agent.cli.app import app
from boss_agent.cli.support import G, guarded
from boss_agent.errors import ConfigError, StateError
from tests.support.config import NO_CODEX


@pytest.fixture(autouse=True)
def _fresh_globals(monkeypatch: pytest.MonkeyPatch) -> None:
    """The root callback sets ``G`` in-process; later tests must not inherit it."""
    monkeypatch.setattr(G, "config_path", None)
    monkeypatch.setattr(G, "debug", False)


def test_the_root_config_option_reaches_the_service_commands(tmp_path: Path) -> None:
    config = tmp_path / "elsewhere.toml"
    state = tmp_path / "state-from-root-config"
    config.write_text(f'state_dir = "{state}"\n[codex]\nbin = "{NO_CODEX}"\n')  # a plan never runs codex
    result = CliRunner().invoke(app, ["--config", str(config), "service", "install", "--dry-run"],
                                env={"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "BOSS_AGENT_CONFIG": None,
                                     "BOSS_STATE_DIR": None})
    assert result.exit_code == 0, result.output
    assert f"BOSS_STATE_DIR={state}" in result.output
    assert not (tmp_path / "xdg").exists()  # still a dry run


def test_a_bad_root_config_fails_a_service_command_with_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("max_concurrent_tasks = 0\n")
    result = CliRunner().invoke(app, ["--config", str(bad), "service", "status"])
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0 and "max_concurrent_tasks" in result.output


def _raise(exc: BaseException) -> None:
    raise exc


@pytest.mark.parametrize(("exc", "code"), [(ConfigError("bad key"), 2), (StateError("locked"), 1),
                                           (ValueError("a bug\nsecond line"), 1)])
def test_every_error_is_one_line_on_stderr_with_its_exit_code(
    exc: Exception, code: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(G, "debug", False)
    with pytest.raises(typer.Exit) as exit_info:
        guarded(lambda: _raise(exc))
    assert exit_info.value.exit_code == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("boss-agent: ")


def test_debug_lets_the_traceback_through(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(G, "debug", True)
    with pytest.raises(ValueError, match="a bug"):
        guarded(lambda: _raise(ValueError("a bug")))


def test_typers_own_exit_keeps_its_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(G, "debug", False)
    with pytest.raises(typer.Exit) as exit_info:
        guarded(lambda: _raise(typer.Exit(3)))
    assert exit_info.value.exit_code == 3
