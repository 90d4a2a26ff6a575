"""The tests' own layout, read with ``ast``: fixtures and helpers live in the folder
conftests and ``tests/support``, never in another test module, and ``tests/unit`` stays
pure (no process, no socket, no codex, no redis-server)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
LAYERS = ("unit", "contract", "peers", "e2e", "security", "soak")  # the folders that hold test modules

# What a unit test must not reach for: each one starts a process or opens a socket.
PROCESS_MODULES = {"subprocess", "socket", "multiprocessing", "pty", "asyncio.subprocess", "aiohttp"}
PROCESS_CALLS = {"create_subprocess_exec", "create_subprocess_shell", "open_connection", "start_server",
                 "open_unix_connection", "start_unix_server", "fork", "posix_spawn", "system", "Popen"}
PROCESS_NAMES = {  # names that start a peer, by the module they come from
    "boss_agent.appserver.client": {"AppServer"},
    "boss_agent.controlplane": {"ControlPlane"},
    "boss_agent.demo.scripted_model": {"ScriptedModel"},
    "tests.conftest": {"RedisProcess", "free_port"},
    "tests.support.cli": {"run_cli", "run_cli_async"},
    "tests.support.daemon": {"FaultProxy", "paired_daemon", "serving"},
    "tests.support.runner": {"missing_app_server", "sleepers"},
}
PROCESS_SUPPORT = {"tests.support.approvals", "tests.support.codex_raw", "tests.support.e2e",
                   "tests.support.redis_process",
                   "tests.support.gateway", "tests.support.notify_socket", "tests.support.redis_tls",
                   "tests.support.webdriver", "tests.support.lifecycle_prog", "tests.support.desktop",
                   "tests.support.codex", "tests.support.phone"}
PROCESS_FIXTURES = {"codex_bin", "codex_home", "scripted_model", "module_model", "redis_server",
                    "redis_server_bin", "plane", "http", "local", "notify", "desktop", "phone_net"}


def _modules(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.py"))


def _imported(path: Path, tree: ast.Module) -> Iterator[tuple[int, str, list[str]]]:
    """(line, absolute module, imported names) for every import in ``tree``."""
    package = path.relative_to(ROOT).with_suffix("").parts[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else ()
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            yield node.lineno, module, [alias.name for alias in node.names]


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _test_module_imports(path: Path, tree: ast.Module) -> list[str]:
    found = [f"{line}: imports {module}" for line, module, _ in _imported(path, tree)
             if module.split(".")[:2] in (["tests", layer] for layer in LAYERS)]
    # pytest_plugins outside the root conftest loads one module's fixtures for every later test.
    return found + [f"{node.lineno}: sets pytest_plugins" for node in tree.body
                    if isinstance(node, ast.Assign) and path != TESTS / "conftest.py"
                    and any(getattr(target, "id", "") == "pytest_plugins" for target in node.targets)]


def _impurities(path: Path, tree: ast.Module) -> list[str]:
    found = []
    for line, module, names in _imported(path, tree):
        if module in PROCESS_MODULES or module in PROCESS_SUPPORT:
            found.append(f"{line}: imports {module}")
        found += [f"{line}: imports {name} from {module}" for name in names
                  if name in PROCESS_NAMES.get(module, ())]
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if called in PROCESS_CALLS or called in {"AppServer", "ControlPlane", "ScriptedModel"}:
                found.append(f"{node.lineno}: calls {called}")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found += [f"{node.lineno}: {node.name} asks for the {arg.arg} fixture" for arg in node.args.args
                      if arg.arg in PROCESS_FIXTURES]
    return found


@pytest.mark.parametrize("path", _modules(TESTS), ids=lambda p: str(p.relative_to(TESTS)))
def test_no_module_under_tests_imports_a_test_module(path: Path) -> None:
    found = _test_module_imports(path, _parse(path))
    assert found == [], "a helper belongs in tests/support, a fixture in the folder's conftest"


@pytest.mark.parametrize("path", _modules(TESTS / "unit"), ids=lambda p: p.name)
def test_a_unit_test_starts_no_process_and_opens_no_socket(path: Path) -> None:
    found = _impurities(path, _parse(path))
    assert found == [], f"{path.name} belongs in tests/peers (or e2e), not in tests/unit"


PROBE = """\
import subprocess
from tests.{layer}.codex.test_x import helper
from .test_y import z
from tests.support.cli import invoke, run_cli
from tests.support.waits import eventually
pytest_plugins = ("tests.support.controlplane",)


async def test_t(codex_bin, tmp_path):
    await asyncio.create_subprocess_exec("codex")
""".format(layer="peers")  # so that a grep for such imports finds none in this file either


def test_the_guards_flag_a_cross_import_a_subprocess_and_a_process_fixture() -> None:
    probe, tree = TESTS / "unit" / "probe.py", ast.parse(PROBE)  # parsed, never written
    assert _test_module_imports(probe, tree) == ["2: imports tests.peers.codex.test_x",
                                                 "3: imports tests.unit.test_y", "6: sets pytest_plugins"]
    assert _impurities(probe, tree) == ["1: imports subprocess", "4: imports run_cli from tests.support.cli",
                                        "9: test_t asks for the codex_bin fixture",
                                        "10: calls create_subprocess_exec"]
