"""How an error ends a command: one line for stderr and an exit code.

Shared by the typer commands (``support.guarded``) and the daemon's typer-free start
(``entry.py``), so ``boss-agent run`` fails exactly as every other command does:
``ConfigError`` is exit 2, any other error exit 1, Ctrl-C exit 130. No typer here.
"""

from __future__ import annotations

from boss_agent.errors import BossAgentError, ConfigError
from boss_agent.redact import mask_secrets

EXIT_FAILED = 1
EXIT_CONFIG = 2
EXIT_INTERRUPTED = 130  # the shell's convention for Ctrl-C


def failure(exc: Exception) -> tuple[str, int]:
    """The stderr line (secrets masked) and the exit code for an error that ends a command."""
    if isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1 and isinstance(exc.exceptions[0], Exception):
        return failure(exc.exceptions[0])  # a task group's one failure is the command's error
    if isinstance(exc, ConfigError):
        message, code = f"config error: {exc}", EXIT_CONFIG
    elif isinstance(exc, BossAgentError):
        message, code = str(exc), EXIT_FAILED
    else:  # a bug: still one line, the traceback behind --debug
        detail = str(exc).splitlines()[0] if str(exc) else ""
        message = (f"internal error: {exc.__class__.__name__}: {detail} "
                   "(run with --debug for the traceback)")
        code = EXIT_FAILED
    return f"boss-agent: {mask_secrets(message)}", code
