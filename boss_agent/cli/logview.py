"""`boss-agent logs [-f]`: the daemon's rotating JSON-lines log, rendered for people.

``logs.py`` writes ``state_dir/logs/boss-agent.log`` (rotated to ``.1`` … ``.5``).
``iter_log_lines`` reads it, optionally the rotated files first, and with
``follow`` keeps reading across rotations like ``tail -F``. Lines were sanitized
when they were written; lines that are not ours (not JSON) are masked here too.
"""

from __future__ import annotations

import json
import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from boss_agent.logs import LOG_FILE_BACKUPS
from boss_agent.redact import mask_secrets

LOG_FILE = "boss-agent.log"
FOLLOW_POLL_S = 0.5  # `logs -f` cadence: a person reads along, half a second is live enough


def log_path(state_dir: Path) -> Path:
    return Path(state_dir) / "logs" / LOG_FILE


def render_line(raw: str) -> str:
    """One JSON log line as ``ts LEVEL logger: message`` (+ an indented traceback)."""
    text = raw.rstrip("\n")
    try:
        entry = json.loads(text)
    except ValueError:
        return mask_secrets(text)
    if not isinstance(entry, dict) or "msg" not in entry:
        return mask_secrets(text)
    level = str(entry.get("level", "")).upper()
    line = f"{entry.get('ts', '-')} {level:<7} {entry.get('logger', '-')}: {entry['msg']}"
    if entry.get("exc"):
        line += "\n" + "\n".join(f"    {part}" for part in str(entry["exc"]).splitlines())
    return line


def _rotated(path: Path) -> list[Path]:
    """Existing backups, oldest first (``.5`` … ``.1``)."""
    candidates = (path.with_name(f"{path.name}.{n}") for n in range(LOG_FILE_BACKUPS, 0, -1))
    return [p for p in candidates if p.is_file()]


def _read_all(path: Path) -> Iterator[str]:
    try:
        with path.open("rb") as handle:
            yield from (line.decode("utf-8", "replace") for line in handle)
    except FileNotFoundError:  # rotated away between listing and opening
        return


def iter_log_lines(
    state_dir: Path,
    follow: bool = False,
    *,
    raw: bool = False,
    rotated: bool = False,
    last: int | None = None,
    poll_interval_s: float = FOLLOW_POLL_S,
    should_stop: Callable[[], bool] | None = None,
) -> Iterator[str]:
    """Yield the log's lines (rendered, or as written with ``raw``).

    ``rotated`` starts with the backups; ``last`` keeps only the final N lines of
    what exists now; ``follow`` then waits for new lines until ``should_stop()``.
    """
    path = log_path(state_dir)
    render = (lambda line: line.rstrip("\n")) if raw else render_line
    history = [line for p in (_rotated(path) if rotated else []) for line in _read_all(p)]
    handle = _open(path)
    if handle is not None:
        history.extend(_complete_lines(handle))
    for line in deque(history, maxlen=last) if last is not None else history:
        yield render(line)
    if follow:
        yield from (render(line) for line in _follow(path, handle, poll_interval_s, should_stop))
    elif handle is not None:
        handle.close()


def _open(path: Path) -> IO[bytes] | None:
    # Binary: tell() is then a byte offset, comparable with the file's size.
    try:
        return path.open("rb")
    except FileNotFoundError:
        return None


def _complete_lines(handle: IO[bytes]) -> Iterator[str]:
    """Whole lines up to EOF; a trailing partial line is left for the next read."""
    while True:
        start = handle.tell()
        line = handle.readline()
        if not line:
            return
        if not line.endswith(b"\n"):
            handle.seek(start)  # the writer is mid-line
            return
        yield line.decode("utf-8", "replace")


def _follow(
    path: Path, handle: IO[bytes] | None, poll_s: float, should_stop: Callable[[], bool] | None
) -> Iterator[str]:
    try:
        while True:
            if handle is None:
                handle = _open(path)
            if handle is not None:
                yield from _complete_lines(handle)
                if _replaced(path, handle):
                    # The writer may have appended to the old file just before it rotated:
                    # drain it before switching, or those lines are lost.
                    yield from _complete_lines(handle)
                    handle.close()
                    handle = None
                    continue
            if should_stop is not None and should_stop():
                return
            time.sleep(poll_s)
    finally:
        if handle is not None:
            handle.close()


def _replaced(path: Path, handle: IO[bytes]) -> bool:
    """True when ``path`` now names another file (rotated) or was truncated."""
    try:
        current = os.stat(path)
    except FileNotFoundError:
        return False  # mid-rotation: the new file is not there yet
    mine = os.fstat(handle.fileno())
    return (current.st_ino, current.st_dev) != (mine.st_ino, mine.st_dev) or current.st_size < handle.tell()
