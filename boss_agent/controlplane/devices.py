"""Pairing codes, paired devices and their heartbeats.

A pairing code is six digits shown as ``483-921``, single use, valid for its TTL. A
device token is a random secret handed out once at pairing; only its sha256 is
stored, so a copy of the database does not let anyone act as a device. Each client
(source address) gets ten wrong codes per ``PAIRING_WINDOW_S``, then a 429 until the
window moves on: the million codes cannot be searched, and one client's guesses never
void another user's code. (On loopback every local process shares 127.0.0.1, so a
local guesser can delay local pairing by one window, but never steal or void a code.) A revoked
device's token stops working at once and its running tasks are abandoned (see
``queue.py``).
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from typing import Any

from boss_agent.controlplane.db import Database, dumps, iso, loads
from boss_agent.errors import ControlPlaneError

logger = logging.getLogger(__name__)

PAIRING_CODE_TTL_S = 600  # long enough to type it on another machine, short enough to be useless later
PAIRING_CODE_DIGITS = 6
MAX_FAILED_PAIRINGS = 10  # per client and window: a typo or two is fine; a million-code search is not
PAIRING_WINDOW_S = 600  # one code's TTL: a client gets ten guesses per code lifetime at most
MAX_TRACKED_CLIENTS = 4096  # bounds the memory a flood of source addresses can take
OFFLINE_AFTER_S = 60  # four missed 15 s heartbeats (the lease): the device reads offline, not its last state
DEVICE_INFO_KEYS = ("deviceName", "hostname", "platform", "arch", "agentVersion")
HEARTBEAT_KEYS = ("agentVersion", "state", "runningTaskIds", "maxConcurrentTasks", "capabilities", "system")


def hash_token(token: str) -> str:
    # surrogatepass: a header's undecodable bytes arrive surrogate-escaped, and must not raise.
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def normalize_code(code: str) -> str:
    """``483-921``, ``483921`` and `` 483 921 `` are the same code."""
    return "".join(ch for ch in code if ch.isdigit())


def format_code(digits: str) -> str:
    return f"{digits[:3]}-{digits[3:]}"


class AttemptLimiter:
    """Wrong pairing codes per client over a sliding window (in memory: a restart forgives)."""

    def __init__(self, max_failures: int = MAX_FAILED_PAIRINGS, window_s: float = PAIRING_WINDOW_S) -> None:
        self.failures: dict[str, list[float]] = {}
        self.max_failures = max_failures
        self.window_s = window_s

    def retry_after(self, client: str, now: float) -> int | None:
        """Seconds until ``client`` may try again, or None when it may now."""
        recent = [t for t in self.failures.get(client, []) if t > now - self.window_s]
        if recent:
            self.failures[client] = recent
        else:
            self.failures.pop(client, None)
        if len(recent) < self.max_failures:
            return None
        return max(1, int(recent[0] + self.window_s - now) + 1)

    def failed(self, client: str, now: float) -> None:
        if client not in self.failures and len(self.failures) >= MAX_TRACKED_CLIENTS:
            del self.failures[next(iter(self.failures))]  # the longest-known client goes first
        self.failures.setdefault(client, []).append(now)


class Devices:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.attempts = AttemptLimiter()

    def create_pairing_code(self, ttl_s: float = PAIRING_CODE_TTL_S) -> str:
        now = self.db.clock()
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM pairing_codes WHERE expires_at < ?", (now - 86_400,))
            while True:
                digits = "".join(secrets.choice("0123456789") for _ in range(PAIRING_CODE_DIGITS))
                exists = conn.execute("SELECT 1 FROM pairing_codes WHERE code = ?", (digits,)).fetchone()
                if not exists:
                    break
            conn.execute(
                "INSERT INTO pairing_codes (code, created_at, expires_at) VALUES (?, ?, ?)",
                (digits, now, now + ttl_s),
            )
        return format_code(digits)

    def pair(self, code: str, info: dict[str, Any], client: str = "") -> tuple[str, str]:
        """Consume ``code`` and register a device; return ``(deviceId, deviceToken)``.

        ``client`` (the source address) is who the wrong-code limit counts against.
        """
        now = self.db.clock()
        wait = self.attempts.retry_after(client, now)
        if wait is not None:
            raise ControlPlaneError(429, "too_many_attempts", "too many wrong pairing codes; try again later",
                                    retry_after_s=wait)
        digits = normalize_code(code)
        device_id = "dev_" + secrets.token_hex(8)
        token = secrets.token_urlsafe(32)
        with self.db.transaction() as conn:
            row = conn.execute("SELECT * FROM pairing_codes WHERE code = ?", (digits,)).fetchone()
            valid = row is not None and row["used_by"] is None and len(digits) == PAIRING_CODE_DIGITS
            if not valid:
                self.attempts.failed(client, now)
            elif row["expires_at"] > now:
                conn.execute("UPDATE pairing_codes SET used_by = ? WHERE code = ?", (device_id, digits))
                conn.execute(
                    "INSERT INTO devices (device_id, token_hash, info, paired_at) VALUES (?, ?, ?, ?)",
                    (device_id, hash_token(token), dumps({k: info.get(k) for k in DEVICE_INFO_KEYS}), now),
                )
        if not valid:
            raise ControlPlaneError(400, "invalid_pairing_code", "the pairing code is not valid")
        if row["expires_at"] <= now:
            raise ControlPlaneError(410, "pairing_code_expired", "the pairing code has expired")
        return device_id, token

    def authenticate(self, token: str) -> str | None:
        """The device id a bearer token belongs to, or None (unknown or revoked)."""
        row = self.db.one(
            "SELECT device_id FROM devices WHERE token_hash = ? AND revoked_at IS NULL", hash_token(token)
        )
        return row["device_id"] if row else None

    def record_heartbeat(self, device_id: str, body: dict[str, Any]) -> None:
        beat = {k: body.get(k) for k in HEARTBEAT_KEYS}
        self.db.conn.execute(
            "UPDATE devices SET last_heartbeat_at = ?, heartbeat = ? WHERE device_id = ?",
            (self.db.clock(), dumps(beat), device_id),
        )

    def revoke(self, device_id: str) -> None:
        cur = self.db.conn.execute(
            "UPDATE devices SET revoked_at = ? WHERE device_id = ? AND revoked_at IS NULL",
            (self.db.clock(), device_id),
        )
        if cur.rowcount == 0 and self.db.one("SELECT 1 FROM devices WHERE device_id = ?", device_id) is None:
            raise ControlPlaneError(404, "device_not_found", "no such device")

    def device(self, device_id: str) -> dict[str, Any]:
        row = self.db.one("SELECT * FROM devices WHERE device_id = ?", device_id)
        if row is None:
            raise ControlPlaneError(404, "device_not_found", "no such device")
        return self._view(row)

    def devices(self) -> list[dict[str, Any]]:
        return [self._view(row) for row in self.db.all("SELECT * FROM devices ORDER BY paired_at")]

    def _state(self, row: Any, beat: dict[str, Any]) -> str | None:
        last = row["last_heartbeat_at"] or row["paired_at"]
        if row["revoked_at"] is None and self.db.clock() - last > OFFLINE_AFTER_S:
            return "offline"  # a dead `up` on an old port, a laptop asleep: not "idle"
        state: str | None = beat.get("state")
        return state

    def _view(self, row: Any) -> dict[str, Any]:
        beat = loads(row["heartbeat"]) or {}
        return {
            "deviceId": row["device_id"],
            **loads(row["info"]),
            "pairedAt": iso(row["paired_at"]),
            "revoked": row["revoked_at"] is not None,
            "revokedAt": iso(row["revoked_at"]),
            "lastHeartbeatAt": iso(row["last_heartbeat_at"]),
            "state": self._state(row, beat),
            "runningTaskIds": beat.get("runningTaskIds") or [],
            "maxConcurrentTasks": beat.get("maxConcurrentTasks"),
            "capabilities": beat.get("capabilities"),
            "system": beat.get("system"),
        }

    def authenticate_id(self, device_id: str) -> str | None:
        """``device_id`` when it is paired and not revoked, else None."""
        row = self.db.one("SELECT device_id FROM devices WHERE device_id = ? AND revoked_at IS NULL", device_id)
        return row["device_id"] if row else None
