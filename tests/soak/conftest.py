"""Long runs and chaos: the daemon as a real process over many tasks.

Every test below this folder is marked ``soak``. Each test reports its figures with
the ``soak_figures`` fixture; they are printed at the end of the run, in ``-q`` too.
"""

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.layer import apply_marker

_FIGURES = pytest.StashKey[list[str]]()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    apply_marker(items, Path(__file__).parent, "soak")


@pytest.fixture
def soak_figures(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """Call with one line of figures; it shows in the terminal summary."""
    lines = request.config.stash.setdefault(_FIGURES, [])
    return lambda line: lines.append(f"{request.node.name}: {line}")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = terminalreporter.config.stash.get(_FIGURES, [])
    if lines:
        terminalreporter.write_sep("-", "soak and chaos figures")
        for line in lines:
            terminalreporter.write_line(line)
