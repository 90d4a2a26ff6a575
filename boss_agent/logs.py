"""Logging, set up once per process, with the redaction filter on every root handler.

On a terminal the lines are human-readable; under systemd or launchd (or whenever
stderr is not a terminal) they are JSON lines, which journald and log shippers
parse. Every record's message passes through the one sanitizer before any
handler formats it, so a token that slips into an f-string still never lands in a log.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from io import TextIOWrapper
from logging.handlers import RotatingFileHandler
from pathlib import Path

from boss_agent.identity import owner_only, private_dir
from boss_agent.redact import sanitize_text
from boss_agent.timefmt import utc_iso

LOG_FILE_BYTES = 5 * 1024 * 1024  # one rotated file; five of them bound the disk use
LOG_FILE_BACKUPS = 5
MAX_MESSAGE_CHARS = 4000  # a log line is a summary, never a dump
OURS = "_boss_agent_handler"  # marks the root handlers setup_logging installed (and may replace)


class RedactingFilter(logging.Filter):
    """Render the message once, sanitized, and drop the raw arguments."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string must not kill logging
            message = str(record.msg)
        record.msg = sanitize_text(message, limit=MAX_MESSAGE_CHARS)
        record.args = None
        if record.exc_info and record.exc_info[1] is not None:
            # Tracebacks can quote secrets from locals-free frames too (exception text).
            record.exc_text = sanitize_text(
                logging.Formatter().formatException(record.exc_info), limit=None
            )
            record.exc_info = None
        return True


class OwnerOnlyFileHandler(RotatingFileHandler):
    """A rotating log file whose every new file (after each rollover too) is 0600."""

    def _open(self) -> TextIOWrapper:
        with owner_only():
            return super()._open()


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": utc_iso(record.created, ms=True),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_text:
            entry["exc"] = record.exc_text
        return json.dumps(entry, ensure_ascii=False)


def under_service_manager() -> bool:
    """True when systemd or launchd started us (their logs want JSON lines)."""
    return bool(
        os.environ.get("INVOCATION_ID")
        or os.environ.get("JOURNAL_STREAM")
        or os.environ.get("XPC_SERVICE_NAME", "0") not in ("0", "")
    )


def remove_handlers() -> None:
    """Take back the root handlers ``setup_logging`` installed (tests, reconfiguration)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, OURS, False):
            root.removeHandler(handler)
            handler.close()


def setup_logging(level: str = "info", log_dir: Path | None = None, json_lines: bool | None = None) -> None:
    """Configure logging for the process; safe to call again (replaces our handlers).

    Our handlers sit on the root logger, each with the redaction filter, so the records
    of every library (aiohttp, httpx, asyncio...) pass through the sanitizer too; a
    filter on a logger would not see the records its children propagate. ``level``
    applies to ``boss_agent``; other libraries keep the root's level (warnings and up).
    """
    remove_handlers()
    root = logging.getLogger()
    ours = logging.getLogger("boss_agent")
    ours.setLevel(level.upper())
    ours.propagate = True
    if json_lines is None:
        json_lines = under_service_manager() or not sys.stderr.isatty()
    stream = logging.StreamHandler(sys.stderr)
    stream.setFormatter(
        JsonFormatter() if json_lines else logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s")
    )
    handlers: list[logging.Handler] = [stream]
    if log_dir is not None:
        private_dir(log_dir)
        with owner_only():
            file_handler = OwnerOnlyFileHandler(
                log_dir / "boss-agent.log", maxBytes=LOG_FILE_BYTES, backupCount=LOG_FILE_BACKUPS,
                encoding="utf-8",
            )
        file_handler.setFormatter(JsonFormatter())
        handlers.append(file_handler)
    for handler in handlers:
        handler.addFilter(RedactingFilter())
        setattr(handler, OURS, True)
        root.addHandler(handler)
