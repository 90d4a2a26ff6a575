"""`boss-agent up`: the local control plane and the daemon, paired, in one process.

This is the embedded default for a user without a Boss server. The control plane
keeps its SQLite database and secret in ``state_dir/controlplane/``; the daemon pairs
with it on first start (and again only when the control plane's address changed),
then runs as usual. Before any of that it takes the control plane's lock and the
daemon's: a second `up` (or a `run`) on the same state dir refuses in one line and
changes nothing. With ``demo`` the daemon's codex talks to the built-in demo model
(``demo_model``) through its own ``CODEX_HOME``, so no OpenAI account is needed and the
user's own codex home is never touched.

Stopping (SIGINT/SIGTERM) stops the daemon first — it finishes or cancels its tasks
and reports them — and only then closes the control plane that receives the reports.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from boss_agent.aio import race
from boss_agent.codexbin import require_codex
from boss_agent.config import Config
from boss_agent.errors import ConfigError
from boss_agent.controlplane import ControlPlane
from boss_agent.controlplane.server import check_host, exclusive, phone_doors
from boss_agent.daemon.process import InstanceLock
from boss_agent.daemon.runtime import Daemon, check_codex_release
from boss_agent.demo.model import DEMO_FEATURES, demo_responder
from boss_agent.identity import ensure_state_dir, load_identity, save_identity
from boss_agent.demo.scripted_model import ScriptedModel, write_codex_home
from boss_agent.sources.boss.pairing import pair_device
from boss_agent.cli.task_follow import controlplane_dir

logger = logging.getLogger(__name__)

DEFAULT_PORT = 8765  # stable, so the page's bookmark keeps working; --port 0 picks a free one
DEMO_MODEL = "gpt-5.5"  # the slug whose tool surface the demo model scripts (see scripted_model)


async def pair_this_machine(plane: ControlPlane, state_dir: Path) -> None:
    """Pair the daemon with ``plane`` once: on a new port, the same device moves along.

    The token is the control plane's own (its database is ours), so a device it still
    knows keeps its id and only its server URL changes; a new "this machine" per port
    would pile up dead devices on the page.
    """
    identity = load_identity(state_dir)
    if identity is not None and plane.core.devices.authenticate(identity.token) == identity.device_id:
        if identity.server_url != plane.url:
            save_identity(state_dir, replace(identity, server_url=plane.url))
        return
    await pair_device(state_dir, plane.url, plane.create_pairing_code(), device_name="this machine")


def _listen_error(host: str, port: int, exc: OSError) -> str:
    why = "is already in use" if exc.errno == errno.EADDRINUSE else f"cannot be used ({exc.strerror or exc})"
    return f"port {port} on {host} {why}; choose another with --port PORT (--port 0 picks a free one)"


def demo_codex_home(state_dir: Path, model_url: str) -> Path:
    # The features are codex's under-development ones; its warning about them would sit on every card.
    return write_codex_home(state_dir / "demo-codex-home", model_url, model=DEMO_MODEL, features=DEMO_FEATURES,
                            extra_toml="suppress_unstable_features_warning = true")


async def run_up(config: Config, *, demo: bool, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                 on_ready: Callable[[str], None] | None = None, handle_signals: bool = True,
                 rotate_secret: bool = False) -> None:
    """Serve until the daemon stops; ``on_ready`` gets the page URL (with its token).

    ``rotate_secret`` replaces the page secret first: old sessions and URLs stop working.
    """
    check_host(host)  # the flag's own mistake first
    # Before the page is up: a codex below the range is one line and exit 2, not a page.
    await asyncio.to_thread(check_codex_release, config)
    state_dir = ensure_state_dir(config.state_dir)
    db_path = controlplane_dir(state_dir) / "controlplane.db"
    async with contextlib.AsyncExitStack() as stack:
        # Both locks before anything changes: a second `up` (or a `run`) on this state dir
        # must not re-pair, rewrite the demo model's address or rotate the secret.
        stack.enter_context(exclusive(db_path.parent))
        daemon_lock = stack.enter_context(InstanceLock(state_dir))
        require_codex(config.codex.bin)  # not a page whose every task fails for want of codex
        try:
            plane = await stack.enter_async_context(ControlPlane(db_path, host=host, port=port,
                                                                 rotate_secret=rotate_secret,
                                                                 **phone_doors(config.local)))
        except OSError as exc:
            raise ConfigError(_listen_error(host, port, exc)) from exc
        codex_home = None
        if demo:
            model = stack.enter_context(ScriptedModel(responder=demo_responder))
            codex_home = demo_codex_home(state_dir, model.base_url)
        await pair_this_machine(plane, state_dir)
        daemon = Daemon(replace(config, server_url=plane.url), codex_home=codex_home,
                        handle_signals=handle_signals, instance_lock=daemon_lock)
        ready = asyncio.Event()
        async with asyncio.TaskGroup() as tg:
            running = tg.create_task(daemon.run(ready), name="daemon")
            # Ordering: report readiness only once the daemon claims, or the user's
            # first task would sit in the queue with no device to take it.
            await race(running, ready.wait())  # the daemon task is watched, not cancelled
            if ready.is_set() and on_ready is not None:
                on_ready(plane.page_url)
