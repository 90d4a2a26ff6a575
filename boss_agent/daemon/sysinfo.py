"""System facts for the heartbeat (device API §2 ``system``), from psutil.

Every fact is best effort: a platform that cannot answer one gets ``None`` there,
never an exception that would delay a heartbeat.
"""

from __future__ import annotations

import logging
import os
import platform
from typing import Any

import psutil

logger = logging.getLogger(__name__)

_MB = 1024 * 1024


def _os_name() -> str:
    system = platform.system().lower()
    return {"darwin": "darwin", "linux": "linux", "windows": "windows"}.get(system, system or "unknown")


def _load_avg_1m() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


def _on_battery() -> bool | None:
    try:
        battery = psutil.sensors_battery()
    except (AttributeError, NotImplementedError, OSError, RuntimeError):
        return None
    return None if battery is None else not battery.power_plugged


def system_facts() -> dict[str, Any]:
    """The heartbeat's ``system`` object."""
    memory = psutil.virtual_memory()
    return {
        "os": _os_name(),
        "osVersion": platform.release() or None,
        "cpuCount": psutil.cpu_count() or os.cpu_count(),
        "memTotalMb": memory.total // _MB,
        "memAvailableMb": memory.available // _MB,
        "loadAvg1m": _load_avg_1m(),
        "onBattery": _on_battery(),
    }
