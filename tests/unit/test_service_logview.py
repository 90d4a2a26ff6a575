"""`boss-agent logs [-f]`: the real rotating JSON log, rendered and followed across rotation."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from logging.handlers import RotatingFileHandler
from pathlib import Path

import pytest

from boss_agent.logs import JsonFormatter, RedactingFilter, setup_logging
from boss_agent.cli.logview import iter_log_lines, log_path, render_line

FOLLOW_BOUND_S = 20  # a follower that finds nothing gives up after this, failing the test
FAST_POLL_S = 0.01


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[logging.Logger]:
    """A logger writing through the daemon's own file handler setup (JSON + redaction)."""
    setup_logging("info", log_dir=tmp_path / "logs", json_lines=True)
    logger = logging.getLogger("boss_agent.test_logview")
    yield logger
    for handler in list(logging.getLogger("boss_agent").handlers):
        logging.getLogger("boss_agent").removeHandler(handler)
        handler.close()


def bounded() -> Callable[[], bool]:
    deadline = time.monotonic() + FOLLOW_BOUND_S
    return lambda: time.monotonic() > deadline


def test_json_lines_from_the_daemon_are_rendered_for_people_and_stay_redacted(tmp_path, writer):
    writer.info("heartbeat ok for device %s", "dev_1")
    writer.warning("server said Authorization: Bearer abcdef123456")
    lines = list(iter_log_lines(tmp_path))
    assert len(lines) == 2
    assert lines[0].endswith("INFO    boss_agent.test_logview: heartbeat ok for device dev_1")
    assert lines[0][:4].isdigit() and "Z " in lines[0]
    assert "WARNING" in lines[1] and "abcdef123456" not in lines[1]


def test_raw_mode_yields_the_json_lines_as_written(tmp_path, writer):
    writer.info("hello")
    (line,) = iter_log_lines(tmp_path, raw=True)
    assert json.loads(line)["msg"] == "hello"


def test_a_traceback_is_rendered_indented_under_its_line(tmp_path, writer):
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        writer.exception("task failed")
    (text,) = iter_log_lines(tmp_path)
    first, *rest = text.splitlines()
    assert first.endswith("task failed")
    assert rest and all(line.startswith("    ") for line in rest)
    assert "RuntimeError: boom" in text


def test_lines_that_are_not_ours_are_shown_masked():
    assert render_line("plain text with token=abcdef123\n") == "plain text with token=[redacted]"
    assert render_line('["json", "but not a record"]') == '["json", "but not a record"]'


def test_no_log_file_yet_yields_nothing(tmp_path):
    assert list(iter_log_lines(tmp_path)) == []


def _rotating(tmp_path: Path, max_bytes: int = 0) -> RotatingFileHandler:
    path = log_path(tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = RotatingFileHandler(path, maxBytes=max_bytes, backupCount=5, encoding="utf-8")
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RedactingFilter())
    return handler


def _record(message: str) -> logging.LogRecord:
    return logging.LogRecord("boss_agent.x", logging.INFO, __file__, 1, message, None, None)


def test_rotated_files_come_first_oldest_first_and_last_keeps_the_tail(tmp_path):
    handler = _rotating(tmp_path)
    for n in range(6):
        handler.emit(_record(f"line {n}"))
        if n % 2 == 1:
            handler.doRollover()  # files: .3 = 0,1  .2 = 2,3  .1 = 4,5
    handler.emit(_record("line 6"))
    handler.close()
    messages = [line.rsplit(": ", 1)[1] for line in iter_log_lines(tmp_path, rotated=True)]
    assert messages == [f"line {n}" for n in range(7)]
    tail = list(iter_log_lines(tmp_path, rotated=True, last=2))
    assert [line.rsplit(": ", 1)[1] for line in tail] == ["line 5", "line 6"]
    assert len(list(iter_log_lines(tmp_path))) == 1  # without rotated: the current file only


def test_follow_yields_new_lines_and_keeps_going_across_a_rotation(tmp_path):
    handler = _rotating(tmp_path)
    handler.emit(_record("before"))
    lines = iter_log_lines(tmp_path, follow=True, poll_interval_s=FAST_POLL_S, should_stop=bounded())
    assert next(lines).endswith("before")
    handler.emit(_record("appended"))
    assert next(lines).endswith("appended")
    handler.emit(_record("last in the old file"))  # written just before the rotation
    handler.doRollover()
    handler.emit(_record("first in the new file"))
    assert next(lines).endswith("last in the old file")
    assert next(lines).endswith("first in the new file")
    handler.close()
    lines.close()


def test_follow_holds_back_a_partial_line_until_the_writer_completes_it(tmp_path):
    path = log_path(tmp_path)
    path.parent.mkdir(parents=True)
    with path.open("w") as out:
        out.write('{"ts": "t", "level": "info", "logger": "l", "msg": "whole"}\n')
        out.write('{"ts": "t", "level": "info", "logger": "l", "msg": "hal')
        out.flush()
        lines = iter_log_lines(tmp_path, follow=True, poll_interval_s=FAST_POLL_S, should_stop=bounded())
        assert next(lines) == "t INFO    l: whole"  # the half line is not rendered yet
        out.write('f"}\n')
        out.flush()
        assert next(lines) == "t INFO    l: half"
    lines.close()


def test_follow_starts_even_before_the_daemon_created_its_log(tmp_path):
    give_up = bounded()
    polls: list[int] = []

    def create_on_first_poll() -> bool:
        # Runs while the follower is already waiting for a file that does not exist.
        if not polls:
            handler = _rotating(tmp_path)
            handler.emit(_record("first ever"))
            handler.close()
        polls.append(1)
        return give_up()

    lines = iter_log_lines(tmp_path, follow=True, poll_interval_s=FAST_POLL_S,
                           should_stop=create_on_first_poll)
    assert next(lines).endswith("first ever")
    assert polls  # the file appeared only after following began
    lines.close()


def test_follow_ends_when_told_to_stop(tmp_path):
    _rotating(tmp_path).close()
    assert list(iter_log_lines(tmp_path, follow=True, poll_interval_s=FAST_POLL_S,
                               should_stop=lambda: True)) == []
