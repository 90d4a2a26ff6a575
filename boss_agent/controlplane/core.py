"""The control plane's operations, shared by the device API, the local API and Python.

``Core`` owns the database (``Devices``, ``TaskQueue``), the long-poll signals and
the live-event broadcaster, and is the one place that pairs every state change
with its notifications: a submit wakes the claim long polls, a decision wakes the
approval long polls, and every change of a task or a device is published to the
page as a full view of that object.

Everything here runs on the event loop's thread (see ``db.py``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

from boss_agent.controlplane.approval_store import poll_answer
from boss_agent.controlplane.db import Database
from boss_agent.controlplane.devices import PAIRING_CODE_TTL_S, Devices
from boss_agent.controlplane.events import Broadcaster, Signal
from boss_agent.controlplane.phones import Phones
from boss_agent.controlplane.queue import TaskQueue
from boss_agent.errors import ControlPlaneError

logger = logging.getLogger(__name__)


class Core:
    def __init__(self, db_path: Path, lease_s: float, clock: Any = time.time) -> None:
        self.db = Database(db_path, clock)
        self.devices = Devices(self.db)
        self.phones = Phones(self.db)
        self.queue = TaskQueue(self.db, lease_s)
        self.queue_changed = Signal()
        self.approvals_changed = Signal()
        self.claim_parked = Signal()  # fired when a claim starts waiting: lets tests and the page see parked polls
        self.parked_claims = 0
        self.events = Broadcaster()
        self.closing = asyncio.Event()
        self._wait_reason: str | None = None  # the queued tasks' last published waitReason
        self._offline: set[str] = set()  # devices the page was last told are offline

    def stop(self) -> None:
        """Answer every long poll now and end every stream (the database stays open)."""
        self.closing.set()
        self.queue_changed.fire()
        self.approvals_changed.fire()
        self.events.close()

    def close(self) -> None:
        self.db.close()

    # -- notifications ----------------------------------------------------------

    def _task_changed(self, task_id: str) -> None:
        self.events.publish("task", self.queue.task(task_id))
        self._wait_reason_changed()

    def _wait_reason_changed(self) -> None:
        """A running task's approval, a finished task or a heartbeat can change why the queued
        tasks wait: then each queued task's view goes out again, with the new reason."""
        reason = self.queue.wait_reason()
        if reason == self._wait_reason:
            return
        self._wait_reason = reason
        for view in self.queue.queued():
            self.events.publish("task", view)

    def _device_changed(self, device_id: str) -> None:
        self.events.publish("device", self.devices.device(device_id))

    def snapshot(self) -> dict[str, Any]:
        return {"devices": self.devices.devices(), "tasks": self.queue.tasks()}

    async def _wait(self, event: asyncio.Event, deadline: float) -> bool:
        """Wait for ``event`` until ``deadline`` (monotonic); False on timeout or shutdown."""
        remaining = deadline - time.monotonic()
        if remaining <= 0 or self.closing.is_set():
            return False
        try:
            async with asyncio.timeout(remaining):
                await event.wait()
        except TimeoutError:
            return False
        return not self.closing.is_set()

    # -- user operations --------------------------------------------------------

    def submit_task(self, prompt: str, fields: dict[str, Any]) -> str:
        task_id = self.queue.submit(prompt, fields)
        logger.info("task %s queued", task_id)
        self.queue_changed.fire()
        self._task_changed(task_id)
        return task_id

    def create_pairing_code(self, ttl_s: float = PAIRING_CODE_TTL_S) -> str:
        return self.devices.create_pairing_code(ttl_s)

    def cancel_task(self, task_id: str) -> str:
        status = self.queue.request_cancel(task_id)
        self._task_changed(task_id)
        return status

    def retry_task(self, task_id: str) -> None:
        self.queue.retry(task_id)
        self.queue_changed.fire()
        self._task_changed(task_id)

    def decide(self, task_id: str, approval_id: str, decision: str | dict[str, Any]) -> None:
        self.queue.decide(task_id, approval_id, decision)
        self.approvals_changed.fire()
        self._task_changed(task_id)

    def revoke_device(self, device_id: str) -> None:
        self.devices.revoke(device_id)
        logger.info("device %s revoked", device_id)
        self._device_changed(device_id)
        self.queue_changed.fire()  # its parked claims look again, and get their 401 now
        for task_id in self.queue.expire_leases(device_id):
            self._task_changed(task_id)

    def pair_phone(self, code: str, name: str, client: str) -> tuple[str, str]:
        phone_id, token = self.phones.pair(code, name, client)
        logger.info("phone %s paired", phone_id)
        self._phones_changed()
        return phone_id, token

    def revoke_phone(self, phone_id: str) -> None:
        self.phones.revoke(phone_id)
        logger.info("phone %s revoked", phone_id)
        self.events.end_holder(phone_id)  # its open pages lose their live stream at once
        self._phones_changed()

    def _phones_changed(self) -> None:
        self.events.publish("phones", {"phones": self.phones.phones()}, owner_only=True)

    def sweep_leases(self) -> list[str]:
        expired = self.queue.expire_leases()
        for task_id in expired:
            logger.warning("task %s abandoned: its device stopped renewing the lease", task_id)
            self._task_changed(task_id)
        self._sweep_offline()
        return expired

    def _sweep_offline(self) -> None:
        """Tell the page about each device that went offline since the last sweep."""
        for view in self.devices.devices():
            if view["state"] != "offline":
                self._offline.discard(view["deviceId"])
            elif view["deviceId"] not in self._offline:
                self._offline.add(view["deviceId"])
                self.events.publish("device", view)

    # -- device operations ------------------------------------------------------

    def pair(self, code: str, info: dict[str, Any], client: str = "") -> tuple[str, str]:
        device_id, token = self.devices.pair(code, info, client)
        logger.info("device %s paired", device_id)
        self._device_changed(device_id)
        return device_id, token

    def heartbeat(self, device_id: str, body: dict[str, Any]) -> list[str]:
        with self.db.transaction():  # the beat and every lease it renews: one commit, one fsync
            self.devices.record_heartbeat(device_id, body)
            self.queue.renew_leases(device_id, body.get("runningTaskIds") or [])
        self._device_changed(device_id)
        self._wait_reason_changed()
        return self.queue.cancel_ids(device_id)

    async def claim(self, device_id: str, slots: int, wait_s: float) -> list[dict[str, Any]]:
        deadline = time.monotonic() + wait_s
        while True:
            # Take the signal before looking: a submit after the look still wakes us.
            changed = self.queue_changed.current()
            if self.devices.authenticate_id(device_id) is None:
                raise ControlPlaneError(401, "invalid_token", "the device was revoked")
            tasks = self.queue.claim(device_id, slots)
            if tasks:
                for task in tasks:
                    logger.info("task %s claimed by %s", task["taskId"], device_id)
                    self._task_changed(task["taskId"])
                return tasks
            self.parked_claims += 1
            self.claim_parked.fire()
            try:
                if not await self._wait(changed, deadline):
                    return []
            finally:
                self.parked_claims -= 1

    def progress(self, device_id: str, task_id: str, seq: int, card: dict[str, Any],
                 refs: dict[str, str] | None = None) -> bool:
        cancel = self.queue.progress(device_id, task_id, seq, card, refs)
        self._task_changed(task_id)
        return cancel

    def complete(self, device_id: str, task_id: str, body: dict[str, Any]) -> None:
        if self.queue.complete(device_id, task_id, body):
            logger.info("task %s %s", task_id, body["status"])
            self._task_changed(task_id)

    def create_approval(self, device_id: str, task_id: str, request: dict[str, Any]) -> None:
        if self.queue.create_approval(device_id, task_id, request):
            self._task_changed(task_id)

    def withdraw_approval(self, device_id: str, task_id: str, approval_id: str, reason: str) -> None:
        if self.queue.withdraw_approval(device_id, task_id, approval_id, reason):
            logger.info("approval %s of task %s withdrawn (%s)", approval_id, task_id, reason)
            self.approvals_changed.fire()
            self._task_changed(task_id)

    async def wait_approval(self, device_id: str, task_id: str, approval_id: str, wait_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + wait_s
        while True:
            changed = self.approvals_changed.current()
            approval = self.queue.poll_approval(device_id, task_id, approval_id)
            if approval["status"] == "decided":
                return poll_answer(approval["decision"])
            if approval["status"] == "withdrawn":
                return {"status": "withdrawn"}
            if not await self._wait(changed, deadline):
                return {"status": "pending"}
