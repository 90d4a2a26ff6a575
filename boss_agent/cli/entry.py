"""The console script's entry point: ``boss-agent run`` straight to the daemon.

The daemon runs for days. Parsing its one word with typer would keep typer, click and
the pydantic adapters typer builds for every option (~11 MB RSS, bench row 6) in its
memory all that time. So a plain ``run``, with at most the root options ``--config
PATH`` and ``--debug`` before it, starts the daemon here; any other command line
(``run --help``, an unknown option, every other command) goes to the typer app, which
also has ``run`` and starts the daemon through the same ``start_daemon`` (``cli/start.py``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from boss_agent.cli.exits import EXIT_INTERRUPTED, failure
from boss_agent.cli.start import start_daemon


def run_options(argv: Sequence[str]) -> tuple[str | None, bool] | None:
    """``(config path, debug)`` when ``argv`` is a plain ``run``, else ``None`` (typer's turn)."""
    config: str | None = None
    debug = False
    args = list(argv)
    while args and args[0] != "run":
        arg = args.pop(0)
        if arg == "--debug":
            debug = True
        elif arg == "--config" and args:
            config = args.pop(0)
        elif arg.startswith("--config="):
            config = arg.removeprefix("--config=")
        else:
            return None
    return (config, debug) if args == ["run"] else None


def run_daemon(config_path: str | None, *, debug: bool) -> int:
    """``start_daemon`` with the CLI's error boundary (cli/exits.py); the exit code."""
    try:
        start_daemon(config_path)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:
        if debug:
            raise
        line, code = failure(exc)
        print(line, file=sys.stderr)
        return code
    return 0


def main() -> None:
    """Console-script entry point."""
    options = run_options(sys.argv[1:])
    if options is None:
        from boss_agent.cli.app import main as typer_main

        typer_main()
        return
    config_path, debug = options
    sys.exit(run_daemon(config_path, debug=debug))
