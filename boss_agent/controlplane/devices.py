"""Pairing codes, paired devices and their heartbeats.

A pairing code is six digits shown as ``483-921``, single use, valid for its TTL. A
device token is a random secret handed out once at pairing; only its sha256 is
stored, so a copy of the database does not let anyone act as a device. Ten wrong
codes in a row void every open code, so the million codes cannot be searched. A revoked
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
MAX_FAILED_PAIRINGS = 10  # a typo or two is fine; a million-code search is not
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


class Devices:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.failed_pairings = 0  # wrong codes since the last success (in memory: a restart forgives)

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

    def pair(self, code: str, info: dict[str, Any]) -> tuple[str, str]:
        """Consume ``code`` and register a device; return ``(deviceId, deviceToken)``."""
        now = self.db.clock()
        digits = normalize_code(code)
        device_id = "dev_" + secrets.token_hex(8)
        token = secrets.token_urlsafe(32)
        with self.db.transaction() as conn:
            row = conn.execute("SELECT * FROM pairing_codes WHERE code = ?", (digits,)).fetchone()
            valid = row is not None and row["used_by"] is None and len(digits) == PAIRING_CODE_DIGITS
            if not valid:
                self._failed_pairing(conn, now)  # committed: the refusal is raised after the transaction
            elif row["expires_at"] > now:
                conn.execute("UPDATE pairing_codes SET used_by = ? WHERE code = ?", (device_id, digits))
                conn.execute(
                    "INSERT INTO devices (device_id, token_hash, info, paired_at) VALUES (?, ?, ?, ?)",
                    (device_id, hash_token(token), dumps({k: info.get(k) for k in DEVICE_INFO_KEYS}), now),
                )
                self.failed_pairings = 0
        if not valid:
            raise ControlPlaneError(400, "invalid_pairing_code", "the pairing code is not valid")
        if row["expires_at"] <= now:
            raise ControlPlaneError(410, "pairing_code_expired", "the pairing code has expired")
        return device_id, token

    def _failed_pairing(self, conn: Any, now: float) -> None:
        """Count a wrong code; too many in a row void every open code (no guessing them)."""
        self.failed_pairings += 1
        if self.failed_pairings >= MAX_FAILED_PAIRINGS:
            self.failed_pairings = 0
            conn.execute("UPDATE pairing_codes SET expires_at = ? WHERE used_by IS NULL AND expires_at > ?",
                         (now, now))
            logger.warning("%d wrong pairing codes in a row: every open pairing code was voided",
                           MAX_FAILED_PAIRINGS)

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

    def _view(self, row: Any) -> dict[str, Any]:
        beat = loads(row["heartbeat"]) or {}
        return {
            "deviceId": row["device_id"],
            **loads(row["info"]),
            "pairedAt": iso(row["paired_at"]),
            "revoked": row["revoked_at"] is not None,
            "revokedAt": iso(row["revoked_at"]),
            "lastHeartbeatAt": iso(row["last_heartbeat_at"]),
            "state": beat.get("state"),
            "runningTaskIds": beat.get("runningTaskIds") or [],
            "maxConcurrentTasks": beat.get("maxConcurrentTasks"),
            "capabilities": beat.get("capabilities"),
            "system": beat.get("system"),
        }

    def authenticate_id(self, device_id: str) -> str | None:
        """``device_id`` when it is paired and not revoked, else None."""
        row = self.db.one("SELECT device_id FROM devices WHERE device_id = ? AND revoked_at IS NULL", device_id)
        return row["device_id"] if row else None
