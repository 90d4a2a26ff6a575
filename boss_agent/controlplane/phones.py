"""Phones: one-time phone codes, the phones paired with them, their hashed credentials.

A phone code is ten characters of an unambiguous alphabet (50 bits), single use,
valid ``PHONE_CODE_TTL_S``; only its sha256 is stored. Trading it
(``POST /api/local/phones/pair``) registers a phone and hands out its token once;
only the token's sha256 is stored too, so a copy of the database lets nobody in. A
client address gets ``MAX_WRONG_PHONE_CODES`` wrong (unknown, used or expired) codes
per ``PHONE_CODE_WINDOW_S``, then 429 until the window moves on; a wrong code never
touches the other open codes. A revoked phone's token stops working at once (``Core``
also ends its event streams).
"""

from __future__ import annotations

import secrets
from typing import Any

from boss_agent.controlplane.db import Database, iso
from boss_agent.controlplane.devices import AttemptLimiter, hash_token
from boss_agent.errors import ControlPlaneError

PHONE_CODE_TTL_S = 600  # the contract's ten minutes: enough to fetch the phone and scan
PHONE_CODE_ALPHABET = "23456789ABCDEFGHJKLMNPQRSTUVWXYZ"  # 32 symbols, no 0/O or 1/I
PHONE_CODE_CHARS = 10  # 10 x 5 bits = 50 bits, above the contract's 40, still typeable
MAX_WRONG_PHONE_CODES = 10  # per client and minute (the contract's limit)
PHONE_CODE_WINDOW_S = 60
LAST_SEEN_EVERY_S = 30  # a phone polling the page writes its last-seen time at most this often
MAX_PHONE_NAME = 100


def normalize_phone_code(code: str) -> str:
    return "".join(ch for ch in code.upper() if ch.isalnum())


def format_phone_code(code: str) -> str:
    return f"{code[:5]}-{code[5:]}"


class Phones:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.attempts = AttemptLimiter(MAX_WRONG_PHONE_CODES, PHONE_CODE_WINDOW_S)
        self._seen: dict[str, float] = {}

    def create_code(self, ttl_s: float = PHONE_CODE_TTL_S) -> tuple[str, float]:
        """A new phone code and its expiry (epoch seconds)."""
        now = self.db.clock()
        code = "".join(secrets.choice(PHONE_CODE_ALPHABET) for _ in range(PHONE_CODE_CHARS))
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM phone_codes WHERE expires_at < ?", (now - 86_400,))
            conn.execute("INSERT INTO phone_codes (code_hash, created_at, expires_at) VALUES (?, ?, ?)",
                         (hash_token(code), now, now + ttl_s))
        return format_phone_code(code), now + ttl_s

    def pair(self, code: str, name: str, client: str) -> tuple[str, str]:
        """Consume ``code``; register a phone; ``(phoneId, token)``. 400 for any wrong code."""
        now = self.db.clock()
        wait = self.attempts.retry_after(client, now)
        if wait is not None:
            raise ControlPlaneError(429, "too_many_attempts", "too many wrong phone codes; try again later",
                                    retry_after_s=wait)
        code_hash = hash_token(normalize_phone_code(code))
        phone_id = "ph_" + secrets.token_hex(8)
        token = secrets.token_urlsafe(32)
        with self.db.transaction() as conn:
            used = conn.execute("UPDATE phone_codes SET used_at = ? WHERE code_hash = ? AND used_at IS NULL"
                                " AND expires_at > ?", (now, code_hash, now)).rowcount
            if used:
                conn.execute("INSERT INTO phones (phone_id, name, token_hash, created_at) VALUES (?, ?, ?, ?)",
                             (phone_id, name[:MAX_PHONE_NAME] or "phone", hash_token(token), now))
        if not used:
            self.attempts.failed(client, now)
            raise ControlPlaneError(400, "invalid_pairing_code", "the phone code is unknown, used or expired")
        return phone_id, token

    def authenticate(self, token: str) -> str | None:
        """The phone a token belongs to (and its last-seen time noted), or None."""
        row = self.db.one("SELECT phone_id FROM phones WHERE token_hash = ? AND revoked_at IS NULL",
                          hash_token(token))
        if row is None:
            return None
        phone_id: str = row["phone_id"]
        now = self.db.clock()
        if now - self._seen.get(phone_id, 0.0) >= LAST_SEEN_EVERY_S:
            self._seen[phone_id] = now
            self.db.conn.execute("UPDATE phones SET last_seen_at = ? WHERE phone_id = ?", (now, phone_id))
        return phone_id

    def revoke(self, phone_id: str) -> None:
        cur = self.db.conn.execute("UPDATE phones SET revoked_at = ? WHERE phone_id = ? AND revoked_at IS NULL",
                                   (self.db.clock(), phone_id))
        if cur.rowcount == 0:
            raise ControlPlaneError(404, "phone_not_found", "no such phone (or it is already revoked)")

    def phones(self) -> list[dict[str, Any]]:
        rows = self.db.all("SELECT * FROM phones WHERE revoked_at IS NULL ORDER BY created_at")
        return [{"phoneId": r["phone_id"], "name": r["name"], "createdAt": iso(r["created_at"]),
                 "lastSeenAt": iso(r["last_seen_at"])} for r in rows]
