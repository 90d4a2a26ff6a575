"""End to end: the daemon, the control plane and codex together, as a user runs them.

Every test below this folder is marked ``e2e``.
"""

from pathlib import Path

import pytest

from tests.support.layer import apply_marker


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    apply_marker(items, Path(__file__).parent, "e2e")
