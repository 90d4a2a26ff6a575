"""The metrics hooks: what the sources and the runner call, one line each.

Every function here is a no-op until the daemon installs a ``Recorder`` (it does so
only when ``metrics.listen`` is set, and only then imports ``prometheus_client``: see
``daemon/metrics.py``), so a device without metrics pays one attribute test per event.
A recorder that raises never reaches the caller: a metric is not worth a task.

Labels are chosen by the recorder from a closed set (source, status, backend, agent
type, an error code's shape); no hook passes a prompt, a path, a thread or a task id.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Protocol

logger = logging.getLogger(__name__)


class Recorder(Protocol):
    def task_started(self, source: str, agent_type: str | None) -> None: ...

    def task_finished(self, source: str, agent_type: str | None, status: str, backend: str | None,
                      error_code: str | None, seconds: float) -> None: ...

    def approval_started(self) -> None: ...

    def approval_ended(self, seconds: float) -> None: ...

    def heartbeat_succeeded(self, at: float) -> None: ...

    def gateway_poison(self) -> None: ...


_recorder: Recorder | None = None


def install(recorder: Recorder | None) -> None:
    """The daemon's recorder while it runs (None: back to no-ops)."""
    global _recorder
    _recorder = recorder


def _safely(call: str, *args: object) -> None:
    recorder = _recorder
    if recorder is None:
        return
    try:
        getattr(recorder, call)(*args)
    except Exception:  # a broken metric must never fail the work it counts
        logger.exception("recording metric %s failed", call)


def task_started(source: str, agent_type: str | None = None) -> None:
    _safely("task_started", source, agent_type)


def task_finished(source: str, status: str, backend: str | None, error_code: str | None,
                  seconds: float, agent_type: str | None = None) -> None:
    _safely("task_finished", source, agent_type, status, backend, error_code, seconds)


@contextlib.contextmanager
def approval_waiting() -> Iterator[None]:
    """Around one wait for a person's approval: the pending gauge and the wait time."""
    started = time.monotonic()
    _safely("approval_started")
    try:
        yield
    finally:
        _safely("approval_ended", time.monotonic() - started)


def heartbeat_succeeded() -> None:
    _safely("heartbeat_succeeded", time.time())


def gateway_poison() -> None:
    _safely("gateway_poison")
