"""Thin typer commands: `service install|uninstall|status` and `logs [-f]`.

The main CLI mounts them (``app.add_typer(service_app, name="service")`` and
``app.command("logs")(logs_command)``). Each builds the config, calls one function
from ``plan`` / ``manager`` / ``logview``, and maps errors through the CLI's one error
boundary (``cli_support.guarded``): one line on stderr, exit 2 for configuration
errors, 1 for everything else. The config is the root ``--config``
(``boss-agent --config X service install``); a subcommand's own ``--config`` still
works and wins.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from boss_agent.cli.support import build_config, guarded
from boss_agent.config import Config
from boss_agent.cli.logview import iter_log_lines
from boss_agent.service.manager import service_status
from boss_agent.service.plan import InstallPlan, apply, plan_install, plan_uninstall

service_app = typer.Typer(
    help="Run boss-agent as a service (systemd on Linux, launchd on macOS).",
    no_args_is_help=True,
)

ConfigOption = Annotated[
    Path | None, typer.Option("--config", help="config file (default: the root --config, else the "
                                               "user config dir)")
]
SystemOption = Annotated[
    bool, typer.Option("--system/--user", help="system-wide service instead of a user one")
]


def _load(config: Path | None) -> Config:
    return guarded(lambda: build_config(config_path=config))


def _carry_out(plan: InstallPlan, dry_run: bool) -> None:
    if dry_run:
        typer.echo(plan.render(), nl=False)
        return
    for warning in plan.warnings:
        typer.echo(f"warning: {warning}", err=True)
    guarded(lambda: apply(plan))
    typer.echo(f"{plan.action}ed the {plan.kind}: {plan.service_file}")


@service_app.command("install")
def install(
    system: SystemOption = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print files and commands only")] = False,
    config: ConfigOption = None,
) -> None:
    """Write the unit (or plist) and enable and start it."""
    cfg = _load(config)
    _carry_out(guarded(lambda: plan_install(cfg, system=system)), dry_run)


@service_app.command("uninstall")
def uninstall(
    system: SystemOption = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print commands only")] = False,
    config: ConfigOption = None,
) -> None:
    """Stop and disable the service and remove its file."""
    cfg = _load(config)
    _carry_out(guarded(lambda: plan_uninstall(cfg, system=system)), dry_run)


@service_app.command("status")
def status(
    system: SystemOption = False,
    as_json: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
    config: ConfigOption = None,
) -> None:
    """Is the service installed, enabled and running?"""
    cfg = _load(config)
    result = guarded(lambda: service_status(cfg, system=system))
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    for key, value in result.items():
        shown = {True: "yes", False: "no", None: "unknown"}.get(value, value) \
            if isinstance(value, bool | None) else value
        typer.echo(f"{key.replace('_', ' ')}: {shown}")


def logs_command(
    follow: Annotated[bool, typer.Option("--follow", "-f", help="keep printing new lines")] = False,
    lines: Annotated[int, typer.Option("--lines", "-n", min=1, help="how many recent lines")] = 200,
    raw: Annotated[bool, typer.Option("--raw", help="the JSON lines as written")] = False,
    config: ConfigOption = None,
) -> None:
    """Show the daemon's log (state_dir/logs/boss-agent.log)."""
    cfg = _load(config)
    try:
        for line in iter_log_lines(cfg.state_dir, follow, raw=raw, rotated=True, last=lines):
            typer.echo(line)
    except KeyboardInterrupt:  # Ctrl-C ends `logs -f`; not an error
        pass
