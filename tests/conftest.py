"""Shared fixtures: the real codex binary, the scripted model, a real redis-server, the
local control plane on loopback (``plane``, with a hand-moved ``clock``) and clients of it.

A missing peer is a failure, not a skip: `scripts/test.sh` installs every one of them,
so a test that cannot find codex or redis-server means the set-up is broken.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

# Before anything below imports them: the helpers' asserts report like the tests' own.
pytest.register_assert_rewrite("tests.support")

from boss_agent.controlplane import ControlPlane  # noqa: E402
from boss_agent.demo.scripted_model import ScriptedModel, write_codex_home  # noqa: E402
from tests.support.controlplane import HTTP_TIMEOUT_S, FakeClock  # noqa: E402
from tests.support.redis_process import RedisProcess, running  # noqa: E402
from boss_agent.codexfeatures import CodexFeatures, detect  # noqa: E402
from boss_agent.codexversion import NEWEST_TESTED, dotted  # noqa: E402

# by-framework (the gateway tests' peer) writes ./by-framework.log at import unless its
# logger already has a handler: give it one, so no test litters the working tree.
logging.getLogger("by-framework").addHandler(logging.NullHandler())

REPO = Path(__file__).resolve().parents[1]
# The release the committed full protocol snapshot and scripts/setup-common.sh pin.
PINNED_CODEX_VERSION = dotted(NEWEST_TESTED)


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
    """Path of the real codex CLI under test (the npm wrapper): the pinned one unless
    ``BOSS_TEST_CODEX_BIN`` names another."""
    return _find_codex()


@pytest.fixture(scope="session")
def codex_release(codex_bin: str) -> str:
    """The version of the codex under test, read from the binary (``BOSS_TEST_CODEX_BIN``
    may name any supported release, not only the pinned one)."""
    from boss_agent.codexbin import codex_version

    return codex_version(codex_bin)


@pytest.fixture(scope="session")
def codex_features(codex_bin: str, tmp_path_factory: pytest.TempPathFactory) -> CodexFeatures:
    """What the codex under test offers (boss_agent/codexfeatures.py)."""
    return detect(codex_bin, tmp_path_factory.mktemp("codex-features"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "codex_feature(name): a scenario only a codex with that feature "
                            "can play (codexfeatures.py); skipped, with the reason, on one without it")


@pytest.fixture(autouse=True)
def _codex_feature(request: pytest.FixtureRequest) -> None:
    marker = request.node.get_closest_marker("codex_feature")
    if marker is None:
        return
    features: CodexFeatures = request.getfixturevalue("codex_features")
    name = marker.args[0]
    if not getattr(features, name):
        pytest.skip(f"codex {features.version} lacks {name}; its fallback is tested in "
                    "tests/peers/codex/test_codex_range.py")


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


@pytest.fixture(scope="session")
def redis_server_bin() -> str:
    found = shutil.which("redis-server")
    if not found:
        pytest.fail("redis-server not found: run scripts/test.sh, which installs it", pytrace=False)
    return found


@pytest.fixture
def redis_server(tmp_path: Path, redis_server_bin: str) -> Iterator[RedisProcess]:
    with running(RedisProcess(redis_server_bin, tmp_path)) as server:
        yield server


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "cp" / "controlplane.sqlite3"


@pytest.fixture
async def plane(db_path: Path, clock: FakeClock) -> AsyncIterator[ControlPlane]:
    async with ControlPlane(db_path, clock=clock) as cp:
        yield cp


@pytest.fixture
async def http(plane: ControlPlane) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=plane.url, timeout=HTTP_TIMEOUT_S) as client:
        yield client


@pytest.fixture
async def local(plane: ControlPlane) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the local API, authenticated with the secret as the CLI does."""
    headers = {"Authorization": f"Bearer {plane.secret}"}
    async with httpx.AsyncClient(base_url=plane.url, timeout=HTTP_TIMEOUT_S, headers=headers) as client:
        yield client


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
