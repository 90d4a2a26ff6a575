"""What every typer command shares: the root options, the error boundary, output.

``G`` holds the root options (``--config``, ``--debug``) that the root callback in
``cli.py`` sets before any subcommand runs; subcommand groups mounted from other
packages (``service``) read them here instead of declaring their own. ``guarded``
is the one place where exceptions become exit codes: ``ConfigError`` is one line on
stderr and exit 2, any other error one line and exit 1; a traceback only with
``--debug``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import typer
from typer.exceptions import Abort, Exit, TyperException

from boss_agent.cli.exits import EXIT_INTERRUPTED, failure
from boss_agent.config import Config, load_config


class Globals:
    """The root command's options, for every subcommand."""

    config_path: str | Path | None = None
    debug: bool = False


G = Globals()
T = TypeVar("T")


def guarded(fn: Callable[[], T]) -> T:
    """Run ``fn``; turn errors into one clean line on stderr and an exit code (cli/exits.py)."""
    try:
        return fn()
    except (Exit, Abort, TyperException):
        raise  # typer's own exits and usage errors keep their codes
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except Exception as exc:
        if G.debug:
            raise
        line, code = failure(exc)
        typer.echo(line, err=True)
        raise typer.Exit(code) from None


def tilde(text: str) -> str:
    """``~`` for the home directory; other paths stay as they are, so a fix can be pasted."""
    home = str(Path.home())
    return text.replace(home, "~") if home not in ("", "/") else text


def quiet_logs() -> None:
    """For one-shot commands that start the app-server (doctor, capabilities --refresh):
    its warnings are reported in the command's own result, not as stray stderr lines,
    unless ``--debug`` asks for them."""
    if G.debug:
        logging.basicConfig(level=logging.DEBUG, format="%(levelname)s %(name)s: %(message)s")
    else:
        logging.getLogger("boss_agent").addHandler(logging.NullHandler())


def build_config(*, config_path: str | Path | None = None, **overrides: Any) -> Config:
    """The config from ``config_path`` (else the root ``--config``), env and ``overrides``."""
    return load_config(config_path or G.config_path, overrides=overrides)


def emit(data: Any, as_json: bool, render: Callable[[Any], None]) -> None:
    """``--json``: the data as indented JSON; otherwise ``render`` draws it."""
    if as_json:
        typer.echo(json.dumps(data, indent=2, sort_keys=True, default=str))
    else:
        render(data)


def _flat(data: dict[str, Any]) -> dict[str, Any]:
    """A nested section (``gateway``) as ``gateway.workerId`` lines."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{k}": v for k, v in _flat(value).items()})
        else:
            flat[key] = value
    return flat


def render_pairs(data: dict[str, Any]) -> None:
    """``key  value`` lines; nested sections dotted, lists joined by commas, None as ``-``."""
    data = _flat(data)
    width = max(len(k) for k in data) if data else 0
    for key, value in data.items():
        if isinstance(value, list | tuple):
            value = ", ".join(str(v) for v in value) or "-"
        elif isinstance(value, bool):
            value = "yes" if value else "no"
        typer.echo(f"{key.ljust(width)}  {'-' if value is None else value}")
