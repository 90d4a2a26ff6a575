"""What the daemon needs from a task source: the ``TaskSource`` contract.

A task source is where tasks come from and where their results go back to: the Boss
control plane over HTTP (``sources.boss``) and the Redis Streams gateway
(``sources.gateway``). The daemon holds a list of them and treats them alike:

* ``run(ready)`` serves until cancelled: it claims or receives tasks, runs each one on
  the runner under the daemon's one ``RunRegistry``, and delivers each result once.
  It sets ``ready`` once it is serving. An exception escaping ``run`` is a failure of
  this source only: the daemon logs it, backs off and runs a fresh source (``make``
  again), and the other source never notices.
* ``stop_accepting()`` is the first half of a graceful stop: take no new task; a
  cancel for a running one still works. The daemon then cancels the registry's runs
  (every turn is interrupted on the app-server and ends ``cancelled``).
* ``close()`` runs once after the drain: deliver what is still pending, bounded.
* ``status()`` is the source's part of the state file that ``boss-agent status`` reads:
  flat keys of ``daemon.statefile.STATE_KEYS``, never a secret. The daemon merges the
  sources' parts and knows none of their keys.

A fleet's ``FleetThreads`` (the gateway's ``Fleet``) is where the device publishes
the Codex threads it holds, whichever source started them; the ``RunRegistry`` relays
a source's threads to it while a gateway is up.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol


class TaskSource(Protocol):
    name: str  # the registry's source name: "boss" or "gateway"

    async def run(self, ready: asyncio.Event) -> None:
        """Serve until cancelled; raise only when this source cannot go on."""

    def stop_accepting(self) -> None:
        """Claim or read no new task; running tasks go on."""

    async def close(self) -> None:
        """After the drain: a bounded last delivery of results; release resources."""

    def status(self) -> dict[str, Any]:
        """This source's keys of the state file (``statefile.STATE_KEYS``)."""


class FleetThreads(Protocol):
    async def turn_started(self, thread_ref: str, turn_id: str) -> None:
        """This device holds ``thread_ref``, and ``turn_id`` runs on it now."""

    async def task_ended(self, thread_ref: str | None, turn_id: str | None) -> None:
        """The turn is over; the thread stays here (its rollout is on this device)."""
