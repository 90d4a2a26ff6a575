"""Real processes: signals, sd_notify sockets, locks.

Every test below this folder is marked ``process``.
"""

from pathlib import Path

import pytest

from tests.support.layer import apply_marker


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    apply_marker(items, Path(__file__).parent, "process")
