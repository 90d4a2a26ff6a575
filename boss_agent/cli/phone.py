"""`boss-agent phone pair|list|revoke` and `boss-agent page [--qr]`: the page, again and for phones.

Each talks to the running control plane (`up` or `devserver`) through its files in
the state dir (``LocalClient.for_db_dir``), as `boss-agent task` does: codes and
revocations must reach the process that serves the phones. The installation secret
is only ever printed inside the loopback page URL, never in a phone's URL.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import segno
import typer

from boss_agent.cli.support import build_config, emit, guarded
from boss_agent.controlplane import LocalClient
from boss_agent.controlplane.security import SECRET_FILE, URL_FILE

phone_app = typer.Typer(help="Phones that open the page with no cloud (docs/phone.md).", no_args_is_help=True)
JsonOption = Annotated[bool, typer.Option("--json", help="machine-readable output")]
T = TypeVar("T")


def _with_client(call: Callable[[LocalClient], Awaitable[T]]) -> T:
    from boss_agent.cli.task_follow import controlplane_dir

    async def go() -> T:
        async with LocalClient.for_db_dir(controlplane_dir(build_config().state_dir)) as client:
            return await call(client)

    return guarded(lambda: asyncio.run(go()))


def terminal_qr(text: str) -> str:
    out = io.StringIO()
    segno.make(text, error="m").terminal(out=out, compact=True)
    return out.getvalue()


def show_offer(offer: dict[str, Any], qr: bool) -> None:
    typer.echo(f"Open this on the phone (one use, until {offer['expiresAt']}):\n  {offer['url']}")
    typer.echo(f"code: {offer['code']}")
    if offer.get("fingerprint"):
        typer.echo(f"certificate: {offer['fingerprint']} (the page on the phone shows it too)")
    if qr:
        typer.echo(terminal_qr(offer["url"]), nl=False)


@phone_app.command("pair")
def pair(as_json: JsonOption = False,
         no_qr: Annotated[bool, typer.Option("--no-qr", help="no QR code in the terminal")] = False) -> None:
    """A one-time code for a phone: the URL to open and its QR code."""
    offer = _with_client(lambda client: client.phone_code())
    offer.pop("qr", None)
    emit(offer, as_json, lambda data: show_offer(data, not no_qr))


@phone_app.command("list")
def list_phones(as_json: JsonOption = False) -> None:
    """The paired phones."""
    phones = _with_client(lambda client: client.phones())

    def render(rows: list[dict[str, Any]]) -> None:
        if not rows:
            typer.echo("no phone paired (add one with `boss-agent phone pair`)")
        for row in rows:
            typer.echo(f"{row['phoneId']}  {row['name']}  paired {row['createdAt']}  "
                       f"last seen {row['lastSeenAt'] or 'never'}")

    emit(phones, as_json, render)


@phone_app.command("revoke")
def revoke(phone_id: Annotated[str, typer.Argument(help="the phone's id (see `boss-agent phone list`)")]) -> None:
    """Revoke one phone at once: its next request is refused and its live page stops."""
    _with_client(lambda client: client.revoke_phone(phone_id))
    typer.echo(f"revoked {phone_id}")


def page(qr: Annotated[bool, typer.Option("--qr", help="also a one-time code and QR code for a phone")] = False,
         ) -> None:
    """Print the running control plane's page URL again (loopback), and with --qr how a phone gets in."""
    from boss_agent.cli.task_follow import controlplane_dir
    from boss_agent.errors import ControlPlaneError

    def read() -> str:
        directory = controlplane_dir(build_config().state_dir)
        try:
            url = (directory / URL_FILE).read_text(encoding="utf-8").strip()
            secret = (directory / SECRET_FILE).read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            raise ControlPlaneError(503, "not_running", "no local control plane is running "
                                    "(start it with `boss-agent up`)") from None
        return f"{url}/?token={secret}"

    typer.echo(f"The page (on this machine):\n  {guarded(read)}")
    if qr:
        show_offer(_with_client(lambda client: client.phone_code()), True)
