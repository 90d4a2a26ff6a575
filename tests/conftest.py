"""Shared fixtures: the real codex binary, the scripted model, a real redis-server.

A missing peer is a failure, not a skip: `scripts/test.sh` installs every one of them,
so a test that cannot find codex or redis-server means the set-up is broken.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from boss_agent.demo.scripted_model import ScriptedModel, write_codex_home

# by-framework (the gateway tests' peer) writes ./by-framework.log at import unless its
# logger already has a handler: give it one, so no test litters the working tree.
logging.getLogger("by-framework").addHandler(logging.NullHandler())

REPO = Path(__file__).resolve().parents[1]
PINNED_CODEX_VERSION = "0.171.0"
REDIS_START_TIMEOUT_S = 10


def _find_codex() -> str:
    for candidate in (
        os.environ.get("BOSS_TEST_CODEX_BIN"),
        str(REPO / ".tools" / "node_modules" / ".bin" / "codex"),
        shutil.which("codex"),
    ):
        if candidate and os.path.exists(candidate):
            return candidate
    pytest.fail("codex CLI not found: run scripts/test.sh, which installs @openai/codex", pytrace=False)


@pytest.fixture(scope="session")
def codex_bin() -> str:
    """Path of the pinned real codex CLI (the npm wrapper)."""
    return _find_codex()


@pytest.fixture
def scripted_model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as model:
        yield model


@pytest.fixture(scope="module")
def module_model() -> Iterator[ScriptedModel]:
    """One scripted model for a whole module: each test queues its own responses and reads
    only its own requests (``model.requests[before:]``), so a module starts one server."""
    with ScriptedModel() as model:
        yield model


@pytest.fixture
def codex_home(tmp_path: Path, scripted_model: ScriptedModel) -> Path:
    """A fresh CODEX_HOME whose config points codex at ``scripted_model``."""
    return write_codex_home(tmp_path / "codex-home", scripted_model.base_url)


# Not under /tmp nor $TMPDIR: codex's workspace-write sandbox leaves those writable, so
# only a folder elsewhere shows whether a turn may write outside its workspace.
OUTSIDE_TMP_PARENT = Path("/var/tmp")


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """An empty folder outside every sandbox's writable roots, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="boss-outside-", dir=OUTSIDE_TMP_PARENT))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def redis_server_bin() -> str:
    found = shutil.which("redis-server")
    if not found:
        pytest.fail("redis-server not found: run scripts/test.sh, which installs it", pytrace=False)
    return found


class RedisProcess:
    """A real redis-server on a free loopback port, restartable on the same port."""

    def __init__(self, binary: str, directory: Path) -> None:
        self.binary = binary
        self.directory = directory
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
             "--save", "", "--appendonly", "no", "--protected-mode", "yes"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + REDIS_START_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


@pytest.fixture
def redis_server(tmp_path: Path, redis_server_bin: str) -> Iterator[RedisProcess]:
    server = RedisProcess(redis_server_bin, tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def _restore_boss_agent_logging() -> Iterator[None]:
    """Every test starts with the ``boss_agent`` logger as pytest's caplog expects it.

    ``setup_logging`` (called by in-process CLI runs and the log tests) installs root
    handlers and sets the level; without this, later tests would log through them.
    """
    from boss_agent.logs import remove_handlers

    tree = logging.getLogger("boss_agent")
    saved = tree.level, tree.propagate, list(tree.handlers)
    yield
    remove_handlers()  # setup_logging's handlers sit on the root logger
    for handler in list(tree.handlers):
        if handler not in saved[2]:
            tree.removeHandler(handler)
            handler.close()
    tree.setLevel(saved[0])
    tree.propagate = saved[1]
