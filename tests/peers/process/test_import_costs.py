"""What a fresh process imports: the idle daemon does not pay for the libraries and
modules it does not use (each test imports the daemon's modules in a new interpreter)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_without_metrics_listen_the_daemon_never_imports_prometheus_client() -> None:
    """Idle cost: a quiet device does not pay for the metrics library it does not use."""
    code = ("import sys, boss_agent.daemon.runtime, boss_agent.sources.gateway, boss_agent.cli.app; "
            "sys.exit('prometheus_client' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO, check=False).returncode == 0


def test_the_running_daemon_never_imports_the_types(tmp_path: Path) -> None:
    """The TypedDicts are for the type checker. Imported, their ~220 classes cost the
    idle daemon about 1 MB of RSS for all the days it runs (bench row 6)."""
    code = ("import sys\n"
            "import boss_agent.daemon.runtime, boss_agent.runner, boss_agent.runner.turn\n"
            "import boss_agent.runner.approval_requests, boss_agent.sources.gateway\n"
            "import boss_agent.sources.boss, boss_agent.progress.reducer, boss_agent.appserver.client\n"
            "print(sorted(m for m in sys.modules if m == 'boss_agent.appserver.protocol'))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO,
                          capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]", done.stdout
