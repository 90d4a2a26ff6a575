"""Running boss-agent as a system service: systemd units, launchd agents, logs.

    units.py     render the unit / plist from ``templates/`` (pure)
    manager.py   where the files go; asking systemd / launchd / logind (never raises)
    plan.py      ``plan_install`` / ``plan_uninstall`` -> ``InstallPlan``; ``apply``

The typer commands (``boss-agent service …``, ``logs``) live in ``boss_agent.cli.service``
and ``boss_agent.cli.logview``. The daemon's own lifecycle (lock, sd_notify, watchdog, signals) is in
``boss_agent.daemon.process``; its status file in ``boss_agent.daemon.statefile``.
"""

from boss_agent.service.manager import (
    Host,
    lingering_enabled,
    service_file,
    service_status,
)
from boss_agent.service.plan import (
    InstallPlan,
    MakeDir,
    RemoveFile,
    RunCommand,
    WriteFile,
    apply,
    plan_install,
    plan_uninstall,
)

__all__ = [
    "Host",
    "InstallPlan",
    "MakeDir",
    "RemoveFile",
    "RunCommand",
    "WriteFile",
    "apply",
    "lingering_enabled",
    "plan_install",
    "plan_uninstall",
    "service_file",
    "service_status",
]
