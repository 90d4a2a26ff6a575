"""End to end: the daemon, the control plane and codex together, as a user runs them.

Every test below this folder is marked ``e2e``. The two that drive the reference
gateway peer (``by-framework``, which needs Python 3.12) are not collected where it is
not installed: the Python 3.11 pass of scripts/test.sh runs the rest.
"""

import importlib.util
from pathlib import Path

import pytest

from tests.support.layer import apply_marker

GATEWAY_PEER_MODULES = ["test_gateway_e2e.py", "test_fleet_e2e.py"]
collect_ignore = [] if importlib.util.find_spec("by_framework") else GATEWAY_PEER_MODULES


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    apply_marker(items, Path(__file__).parent, "e2e")
