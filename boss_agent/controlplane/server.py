"""The app factory and ``ControlPlane``, the runner `up`, `devserver` and tests use.

``ControlPlane`` is an async context manager: entering it opens the database, binds
the HTTP server (port 0 picks a free port; ``url`` says which) and starts the lease
sweeper; leaving it answers every long poll at once, ends the page's event streams,
stops the server within ``SHUTDOWN_GRACE_S`` and closes the database. While it runs,
``controlplane.url`` beside the database holds its URL, so `boss-agent task` can find
it; the secret is in ``controlplane.secret`` (see ``security.py``). ``exclusive``
holds ``controlplane.lock`` there: `up` and `devserver` take it before they change
anything, so a second one on the same directory refuses, naming the running page.

Its methods are synchronous and must be called on the event loop's thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Self

from aiohttp import web

from boss_agent.controlplane import api, local, phone_api, tls
from boss_agent.controlplane import web as page
from boss_agent.controlplane.core import Core
from boss_agent.controlplane.devices import PAIRING_CODE_TTL_S
from boss_agent.controlplane.security import (
    DOORS_KEY,
    URL_FILE,
    Doors,
    add_security_headers,
    load_or_create_secret,
    security_middleware,
)
from boss_agent.controlplane.wire import error_middleware
from boss_agent.controlplane.origins import host_port
from boss_agent.controlplane.phone_api import PHONE_DOOR_KEY, PhoneDoor
from boss_agent.netaddr import address_is_loopback, parse_listen, public_origin
from boss_agent.config import LocalSettings
from boss_agent.daemon.process import InstanceLock
from boss_agent.errors import AlreadyRunning, ConfigError, ControlPlaneError, StateError
from boss_agent.identity import write_atomic

logger = logging.getLogger(__name__)

LEASE_S = 60  # four missed 15 s heartbeats: rides out a hiccup, yet a dead device's task shows soon
SHUTDOWN_GRACE_S = 2.0  # long polls answer at once on exit; this only bounds a straggling handler
SWEEP_MIN_S, SWEEP_MAX_S = 0.1, 5.0  # the sweeper looks for expired leases at a quarter lease, within these
MAX_BODY_BYTES = 8 * 1024 * 1024  # a final progress card with many file changes fits comfortably
WAIT_TASK_TIMEOUT_S = 600.0  # default bound for wait_task: a whole Codex turn fits
LOCK_FILE = "controlplane.lock"  # held by the one control plane serving the database beside it


def check_host(host: str) -> None:
    """Refuse a ``--host`` that is not loopback (before anything starts, in `up` too)."""
    if not address_is_loopback(host):
        # The page and the local API are for this machine's user only; a LAN address
        # would hand a ?token= URL and the device API to the whole network. Phones come
        # in through ``listen`` (https) or a reverse proxy's ``public_origins``.
        raise ConfigError(f"--host {host} is not a loopback address (use 127.0.0.1, ::1 or localhost; "
                          "for a phone, see local.listen in docs/phone.md)")


def running_url(directory: Path) -> str | None:
    """The URL of the control plane running in ``directory`` (no token), if it wrote one."""
    try:
        return (directory / URL_FILE).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


@contextlib.contextmanager
def exclusive(directory: Path) -> Iterator[None]:
    """Hold ``directory``'s control plane lock while the block runs.

    Taken before a control plane (or `up`) changes anything there: a second one
    refuses with a ``StateError`` that names the running page instead.
    """
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    lock = InstanceLock(directory, LOCK_FILE)
    try:
        lock.acquire()
    except AlreadyRunning as exc:
        who = f" (pid {exc.pid})" if exc.pid else ""
        url = running_url(directory)
        # The page's token stays out of the line (errors are masked): `page` prints the URL with it.
        where = f"its page is {url} (`boss-agent page` prints it with its token)" if url else "it is still starting"
        raise StateError(f"boss-agent's control plane already runs on this state dir{who}; {where}") from None
    with lock:
        yield


def phone_doors(local: LocalSettings) -> dict[str, Any]:
    """The ``ControlPlane`` arguments of the ``local.*`` config keys."""
    return {"listen": local.listen, "public_origins": local.public_origins,
            "tls_cert": local.tls_cert, "tls_key": local.tls_key}


def build_app(core: Core, doors: Doors) -> web.Application:
    app = web.Application(middlewares=[error_middleware, security_middleware], client_max_size=MAX_BODY_BYTES)
    app[api.CORE_KEY] = core
    app[DOORS_KEY] = doors
    app.add_routes(api.routes)
    app.add_routes(local.routes)
    app.add_routes(phone_api.routes)
    app.add_routes(page.routes)
    app.on_response_prepare.append(add_security_headers)
    return app


class ControlPlane:
    def __init__(
        self,
        db_path: Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        secret: str | None = None,
        rotate_secret: bool = False,
        lease_s: float = LEASE_S,
        clock: Callable[[], float] = time.time,
        listen: tuple[str, ...] = (),
        public_origins: tuple[str, ...] = (),
        tls_cert: Path | None = None,
        tls_key: Path | None = None,
    ) -> None:
        check_host(host)
        try:
            self.listen = tuple(parse_listen(entry) for entry in listen)
            origins = tuple(public_origin(entry) for entry in public_origins)
        except ValueError as exc:
            raise ConfigError(f"local: {exc}") from None
        self.tls_files = (tls_cert, tls_key)
        self.listen_urls: list[str] = []  # https://ADDRESS:PORT of each phone listener, once started
        self.fingerprint: str | None = None
        self.phone_door = PhoneDoor("", None)
        self._app: web.Application | None = None
        self.db_path = Path(db_path)
        self.host = host
        self.port = port
        self.lease_s = lease_s
        secret = secret or load_or_create_secret(self.db_path, rotate=rotate_secret)
        self.doors = Doors(secret, clock, origins)
        self.url = ""
        self._clock = clock
        self._core: Core | None = None
        self._stack = contextlib.AsyncExitStack()

    @property
    def secret(self) -> str:
        return self.doors.secret

    def rotate_secret(self) -> str:
        """A new installation secret: every page session and printed URL stops working."""
        self.doors.secret = load_or_create_secret(self.db_path, rotate=True)
        return self.doors.secret

    @property
    def page_url(self) -> str:
        return f"{self.url}/?token={self.secret}"

    @property
    def core(self) -> Core:
        if self._core is None:
            raise RuntimeError("the control plane is not running (use `async with`)")
        return self._core

    async def __aenter__(self) -> Self:
        try:
            await self._start()
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def _start(self) -> None:
        core = self._core = Core(self.db_path, self.lease_s, self._clock)
        self._stack.callback(self._close_core)
        app = self._app = build_app(core, self.doors)
        app[PHONE_DOOR_KEY] = self.phone_door  # filled in below, once the listeners are bound
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_GRACE_S)
        await runner.setup()
        self._stack.push_async_callback(runner.cleanup)
        site = web.TCPSite(runner, self.host, self.port)
        await site.start()
        await self._start_phone_listeners(runner)
        # The sweeper's task group is exited after the runner stopped (exit order is LIFO).
        group = await self._stack.enter_async_context(asyncio.TaskGroup())
        group.create_task(self._sweep_leases(core))
        self._stack.callback(core.stop)  # first on exit: wakes long polls and the sweeper
        port = runner.addresses[0][1]
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"http://{host}:{port}"
        self._fill_phone_door()
        self._write_url_file()
        logger.info("control plane listening on %s", self.url)

    async def _start_phone_listeners(self, runner: web.AppRunner) -> None:
        if not self.listen:
            return
        addresses = tuple(address for address, _ in self.listen)
        cert, key = tls.certificate(self.db_path.parent, addresses, *self.tls_files)
        context = tls.server_context(cert, key)
        self.fingerprint = tls.fingerprint(cert)
        for address, port in self.listen:
            known = len(runner.addresses)
            try:
                await web.TCPSite(runner, address, port, ssl_context=context).start()
            except OSError as exc:
                raise ConfigError(f"local.listen {host_port(address, port)}: cannot listen "
                                  f"({exc.strerror or exc})") from exc
            bound = runner.addresses[known][1]
            self.listen_urls.append(f"https://{host_port(address, bound)}")
            logger.info("phone listener on %s (certificate %s)", self.listen_urls[-1], self.fingerprint)

    def _fill_phone_door(self) -> None:
        door = self.phone_door
        if self.listen_urls:
            door.base_url, door.fingerprint = self.listen_urls[0], self.fingerprint
        elif self.doors.public_origins:
            door.base_url = self.doors.public_origins[0]
        else:
            door.base_url = self.url  # an SSH tunnel from the phone reaches loopback

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self._stack.aclose()
        finally:
            self._core = None

    def _close_core(self) -> None:
        url_file = self.db_path.parent / URL_FILE
        with contextlib.suppress(OSError):
            # Only our own: another control plane's file would leave it unfindable.
            if self.url and url_file.read_text(encoding="utf-8").strip() == self.url:
                url_file.unlink()
        if self._core is not None:
            self._core.stop()
            self._core.close()

    def _write_url_file(self) -> None:
        write_atomic(self.db_path.parent / URL_FILE, (self.url + "\n").encode())

    async def _sweep_leases(self, core: Core) -> None:
        interval = min(SWEEP_MAX_S, max(SWEEP_MIN_S, self.lease_s / 4))
        while not core.closing.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await core.closing.wait()
            if not core.closing.is_set():
                try:
                    core.sweep_leases()
                except Exception:  # one failed sweep must not stop the next
                    logger.exception("lease sweep failed")

    # -- the Python API (`up`, tests) -------------------------------------------

    def create_pairing_code(self, ttl_s: float = PAIRING_CODE_TTL_S) -> str:
        return self.core.create_pairing_code(ttl_s)

    def create_phone_code(self) -> dict[str, Any]:
        """A one-time phone code: ``{url, code, fingerprint, expiresAt, qr}`` (see ``phone_api``)."""
        if self._app is None:
            raise RuntimeError("the control plane is not running (use `async with`)")
        return phone_api.new_phone_code(self._app)

    def phones(self) -> list[dict[str, Any]]:
        return self.core.phones.phones()

    def revoke_phone(self, phone_id: str) -> None:
        self.core.revoke_phone(phone_id)

    def submit_task(self, prompt: str, **fields: Any) -> str:
        return self.core.submit_task(prompt, fields)

    def task(self, task_id: str) -> dict[str, Any]:
        return self.core.queue.task(task_id)

    def tasks(self) -> list[dict[str, Any]]:
        return self.core.queue.tasks()

    def devices(self) -> list[dict[str, Any]]:
        return self.core.devices.devices()

    def cancel_task(self, task_id: str) -> str:
        return self.core.cancel_task(task_id)

    def decide(self, task_id: str, approval_id: str, decision: str | dict[str, Any]) -> None:
        self.core.decide(task_id, approval_id, decision)

    def revoke_device(self, device_id: str) -> None:
        self.core.revoke_device(device_id)

    async def wait_task(
        self, task_id: str, condition: Callable[[dict[str, Any]], bool], timeout_s: float = WAIT_TASK_TIMEOUT_S
    ) -> dict[str, Any]:
        """The task's view once ``condition(view)`` holds; TimeoutError after ``timeout_s``.

        Driven by the live events, not by polling (for `boss-agent task --follow` and tests).
        """
        async with asyncio.timeout(timeout_s):
            while True:
                # Subscribe before reading: a change in between arrives as an event.
                async with self.core.events.subscribe() as sub:
                    view = self.task(task_id)
                    while not condition(view):
                        item = await sub.queue.get()
                        if item is None:
                            break  # dropped (or shutting down): read afresh
                        kind, payload = item
                        if kind == "task" and payload["taskId"] == task_id:
                            view = payload
                    else:
                        return view
                if self.core.closing.is_set():
                    raise ControlPlaneError(503, "shutting_down", "the control plane is stopping")


async def serve(
    db_path: Path,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    ready: Callable[[ControlPlane], None] | None = None,
    rotate_secret: bool = False,
    local: LocalSettings | None = None,
) -> None:
    """Run a control plane until cancelled (`boss-agent devserver`); prints nothing itself.

    ``ready`` is called once it listens (the CLI prints ``page_url`` there); ``local``
    opens the phones' ways in (``local.*`` config keys). A control plane already serving
    ``db_path``'s directory makes it refuse before anything changes.
    """
    with exclusive(Path(db_path).parent):
        async with ControlPlane(db_path, host=host, port=port, rotate_secret=rotate_secret,
                                **phone_doors(local or LocalSettings())) as plane:
            if ready is not None:
                ready(plane)
            await asyncio.Event().wait()
