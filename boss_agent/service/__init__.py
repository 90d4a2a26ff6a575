"""Running boss-agent as a system service: systemd units, launchd agents, logs.

    units.py     render the unit / plist from ``templates/`` (pure)
    manager.py   where the files go; asking systemd / launchd / logind (never raises)
    plan.py      ``plan_install`` / ``plan_uninstall`` -> ``InstallPlan``; ``apply``
    logview.py   ``iter_log_lines`` for ``boss-agent logs [-f]``
    commands.py  the typer commands the main CLI mounts

The daemon's own lifecycle (lock, sd_notify, watchdog, signals) is in
``boss_agent.lifecycle``; its status file in ``boss_agent.statefile``.
"""

from boss_agent.service.logview import iter_log_lines, log_path, render_line
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
    "iter_log_lines",
    "lingering_enabled",
    "log_path",
    "plan_install",
    "plan_uninstall",
    "render_line",
    "service_file",
    "service_status",
]
