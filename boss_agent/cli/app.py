"""The command line: thin typer commands that build the config and run one thing.

Every command maps errors through ``cli_support.guarded``: ``ConfigError`` is one line
on stderr and exit 2, any other error one line and exit 1. A traceback only with
``--debug``. Nothing here prints a token, a prompt or a home path.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from boss_agent import __version__
from boss_agent.cli.support import (
    G,
    build_config,
    emit,
    guarded,
    quiet_logs,
    render_pairs,
)
from boss_agent.errors import ConfigError
from boss_agent.lifecycles import TaskStatus

app = typer.Typer(
    name="boss-agent",
    help="Let the Boss app drive OpenAI Codex on this machine.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"boss-agent {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    config: Annotated[str | None, typer.Option("--config", help="config file (default: user config dir)",
                                               envvar="BOSS_AGENT_CONFIG")] = None,
    debug: Annotated[bool, typer.Option("--debug", help="show tracebacks")] = False,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="print the version and exit")] = False,
) -> None:
    G.config_path = config
    G.debug = debug


JsonOption = Annotated[bool, typer.Option("--json", help="machine-readable output")]
FollowOption = Annotated[bool, typer.Option("--follow/--no-follow", help="show the live card until it ends")]


@app.command()
def status(as_json: JsonOption = False) -> None:
    """Paired or not, daemon running or not, codex, discovery, tasks, spool; no daemon round trip."""
    from boss_agent.cli.status import collect_status

    emit(guarded(lambda: collect_status(build_config())), as_json, render_pairs)


def _render_checks(checks: list[dict[str, Any]]) -> None:
    for check in checks:
        mark = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}[check["result"]]
        line = f"[{mark}] {check['name']}: {check['detail']}"
        if check["result"] != "ok" and check.get("fix"):
            line += f"\n       fix: {check['fix']}"
        typer.echo(line)


@app.command()
def doctor(as_json: JsonOption = False) -> None:
    """Check the set-up, each check ok / warn / fail with a fix; exit 1 when any check fails."""
    from boss_agent.cli.doctor import run_checks

    quiet_logs()
    checks = guarded(lambda: run_checks(G.config_path))
    emit({"checks": checks}, as_json, lambda data: _render_checks(data["checks"]))
    if any(c["result"] == "fail" for c in checks):
        raise typer.Exit(1)


@app.command()
def capabilities(
    as_json: JsonOption = False,
    refresh: Annotated[bool, typer.Option("--refresh", help="run discovery now and save it")] = False,
) -> None:
    """The app-server's models, skills, plugins and apps as last discovered, and their age."""
    from boss_agent.cli.capabilities import (
        cached_capabilities,
        refresh_capabilities,
        render,
    )

    def collect() -> dict[str, Any]:
        quiet_logs()
        config = build_config()
        return asyncio.run(refresh_capabilities(config)) if refresh else cached_capabilities(config)

    emit(guarded(collect), as_json, lambda data: render(data, typer.echo))


def read_pairing_code() -> str:
    """The code from a prompt (a terminal) or one line of stdin: an argument would show in ``ps``."""
    if sys.stdin.isatty():
        text = str(typer.prompt("Pairing code", err=True))
    else:
        text = sys.stdin.readline()
    if not text.strip():
        raise ConfigError("no pairing code: type it at the prompt or pipe it on stdin")
    return text.strip()


@app.command()
def pair(
    code: Annotated[str | None, typer.Argument(
        help="the pairing code from the Boss app, or the local page's New pairing code button "
             "(omit it to be asked: an argument shows in `ps`)")] = None,
    server: Annotated[str | None, typer.Option("--server", help="Boss control plane URL")] = None,
    name: Annotated[str | None, typer.Option("--name", help="device name (default: host name)")] = None,
) -> None:
    """Pair this device with a Boss control plane; prints the device id, never the token."""
    from boss_agent.sources.boss.pairing import pair_device

    def run() -> str:
        config = build_config(**{"server.url": server})
        if not config.server_url:
            raise ConfigError("no server: pass --server URL or set server.url")
        identity = asyncio.run(pair_device(config.state_dir, config.server_url, code or read_pairing_code(),
                                           device_name=name))
        return identity.device_id

    device_id = guarded(run)
    typer.echo(f"paired: device {device_id}")


@app.command()
def unpair() -> None:
    """Forget this device's token and id."""
    from boss_agent.sources.boss.pairing import unpair_device

    forgot = guarded(lambda: unpair_device(build_config().state_dir))
    typer.echo("unpaired" if forgot else "not paired")


@app.command()
def run() -> None:
    """Run the daemon in the foreground until SIGTERM/SIGINT."""
    from boss_agent.cli.start import start_daemon

    guarded(lambda: start_daemon(G.config_path))


@app.command()
def up(
    demo: Annotated[bool, typer.Option("--demo", help="use the built-in demo model (no OpenAI account)")] = False,
    host: Annotated[str, typer.Option("--host", help="loopback address for the web page")] = "127.0.0.1",
    port: Annotated[int | None, typer.Option("--port", help="web page port (0: a free one)")] = None,
    rotate_secret: Annotated[bool, typer.Option(
        "--rotate-secret", help="new page secret: every open page session and printed URL stops working")] = False,
) -> None:
    """The local control plane and the daemon, paired, in one command."""
    from boss_agent.logs import setup_logging
    from boss_agent.cli.up import DEFAULT_PORT, run_up

    def ready(url: str) -> None:
        typer.echo(f"boss-agent is up. Open the web page:\n  {url}", err=False)
        sys.stdout.flush()

    def start() -> None:
        config = build_config()
        setup_logging(config.log_level, config.state_dir / "logs")
        asyncio.run(run_up(config, demo=demo, host=host, port=DEFAULT_PORT if port is None else port,
                           on_ready=ready, rotate_secret=rotate_secret))

    guarded(start)


@app.command()
def task(
    prompt: Annotated[str, typer.Argument(help="what Codex should do")],
    workdir: Annotated[Path | None, typer.Option("--workdir", help="the project directory")] = None,
    thread: Annotated[str | None, typer.Option("--thread", help="continue this Codex thread")] = None,
    computer_use: Annotated[bool, typer.Option("--computer-use", help="a desktop-control task")] = False,
    follow: FollowOption = True,
) -> None:
    """Submit a task to the local control plane and follow its progress card.

    Without --workdir it runs where any task without one runs (default_workdir, else the
    thread's scratch directory), never in the shell's current directory.
    """
    from boss_agent.cli.task_follow import workdir_field

    fields, where = guarded(lambda: workdir_field(workdir, build_config(), thread=thread))
    typer.echo(where, err=True)
    if thread:
        fields["codexThreadRef"] = thread
    if computer_use:
        fields["intentCategory"] = "computer_use"
    _submit(prompt, fields, follow, steer_of=None)


@app.command()
def steer(
    task_id: Annotated[str, typer.Argument(help="the running task whose turn gets the message")],
    text: Annotated[str, typer.Argument(help="what to tell Codex while it works")],
    follow: FollowOption = True,
) -> None:
    """Send a message into a running task's live turn (a steer) and follow it to the turn's end."""
    _submit(text, {}, follow, steer_of=task_id)


def _submit(prompt: str, fields: dict[str, Any], follow: bool, *, steer_of: str | None) -> None:
    from rich.console import Console

    from boss_agent.cli.task_follow import controlplane_dir, steer_fields, submit_and_follow
    from boss_agent.controlplane import LocalClient

    async def go() -> tuple[str, str]:
        async with LocalClient.for_db_dir(controlplane_dir(build_config().state_dir)) as client:
            extra = await steer_fields(client, steer_of) if steer_of else {}
            return await submit_and_follow(client, prompt, {**fields, **extra}, follow=follow, console=Console())

    task_id, final = guarded(lambda: asyncio.run(go()))
    if not follow:
        typer.echo(task_id)
    elif final != TaskStatus.COMPLETED:
        raise typer.Exit(1)


@app.command()
def devserver(
    host: Annotated[str, typer.Option("--host", help="loopback address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="0 picks a free port")] = 0,
    db: Annotated[Path | None, typer.Option("--db", help="SQLite file")] = None,
    rotate_secret: Annotated[bool, typer.Option(
        "--rotate-secret", help="new page secret: every open page session and printed URL stops working")] = False,
) -> None:
    """Only the local control plane (no daemon)."""
    from boss_agent.controlplane import serve
    from boss_agent.cli.task_follow import controlplane_dir

    def run() -> None:
        config = build_config()
        path = db or controlplane_dir(config.state_dir) / "controlplane.db"

        def ready(plane: Any) -> None:
            typer.echo(f"boss-agent control plane: {plane.page_url}")

        asyncio.run(serve(path, host, port, ready=ready, rotate_secret=rotate_secret, local=config.local))

    guarded(run)


protocol_app = typer.Typer(help="The codex app-server protocol this device speaks.", no_args_is_help=True)
app.add_typer(protocol_app, name="protocol")


@protocol_app.command("snapshot")
def protocol_snapshot(
    out: Annotated[Path, typer.Option("--out", help="where <codex version>/ is written")] = Path(
        "docs/protocol-snapshots/codex-app-server"),
    summary: Annotated[bool, typer.Option(
        "--summary", help="only help.txt, methods.json and coverage.json (~30 KB, not ~11 MB)")] = False,
) -> None:
    """Write the installed codex's schema, TS bindings, method list and coverage."""
    from boss_agent.codexbin import find_codex
    from boss_agent.cli.protocol_snapshot import write_snapshot

    def run() -> Path:
        return write_snapshot(find_codex(build_config().codex.bin), out, full=not summary)

    typer.echo(f"wrote {guarded(run)}")


def _mount_service_commands() -> None:
    from boss_agent.cli.phone import page, phone_app
    from boss_agent.cli.service import logs_command, service_app

    app.add_typer(service_app, name="service")
    app.command("logs", help="Show the daemon's log (-f to follow).")(logs_command)
    app.add_typer(phone_app, name="phone")
    app.command("page")(page)


_mount_service_commands()


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except BrokenPipeError:  # `boss-agent status | head` is fine
        sys.stderr.close()


if __name__ == "__main__":  # pragma: no cover
    main()
