"""The ledger's verbs on passkeys (docs/proof.md), in the SQL both engines speak: register,
list, revoke, record one approval's use of its challenge (the preview digest) with the
passkey's new sign count, and keep and spend the one-time codes that enrol an owner's
first passkey. Their events are written by the caller, in the same write, so the chain
covers every registration, revocation, approval and enrolment code."""

from __future__ import annotations

import time
from typing import Any

from .records import StoredEnrolment, StoredPasskey
from .sql_base import EngineHooks

_COLUMNS = "id, owner_id, label, public_key, sign_count, rp_id, origin, created_at, revoked_at"
_ENROLMENT = "code_sha256, owner_id, created_at, expires_at, used_at, passkey_id"


class PasskeyVerbs(EngineHooks):
    """Passkeys, on one connection inside the transaction the store opened."""

    def insert_passkey(self, passkey: StoredPasskey) -> None:
        self.connection.execute(
            f"INSERT INTO passkeys({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",  # noqa: S608
            (
                passkey.id,
                passkey.owner_id,
                passkey.label,
                passkey.public_key,
                passkey.sign_count,
                passkey.rp_id,
                passkey.origin,
                passkey.created_at,
                passkey.revoked_at,
            ),
        )

    def passkey(self, passkey_id: str) -> StoredPasskey | None:
        row = self.connection.execute(
            f"SELECT {_COLUMNS} FROM passkeys WHERE id = ?" + self.for_update,  # noqa: S608
            (passkey_id,),
        ).fetchone()
        return _passkey(row) if row is not None else None

    def passkeys(self, owner_id: str) -> list[StoredPasskey]:
        # A write that decides on an owner's passkeys (is there a live one? which?)
        # holds the owner until it commits.
        self._lock(f"passkeys:{owner_id}")
        return [
            _passkey(r)
            for r in self.connection.execute(
                f"SELECT {_COLUMNS} FROM passkeys WHERE owner_id = ? "  # noqa: S608
                "ORDER BY created_at, id",
                (owner_id,),
            ).fetchall()
        ]

    def revoke_passkey(self, passkey_id: str) -> None:
        self.connection.execute(
            "UPDATE passkeys SET revoked_at = ? WHERE id = ?", (time.time(), passkey_id)
        )

    def passkey_challenge_used(self, challenge: str) -> bool:
        self._lock(f"passkey_use:{challenge}")
        found = self.connection.execute(
            "SELECT 1 FROM passkey_uses WHERE challenge = ?", (challenge,)
        ).fetchone()
        return found is not None

    def record_passkey_use(
        self, *, challenge: str, passkey_id: str, job_id: str | None, sign_count: int
    ) -> None:
        c = self.connection
        c.execute(
            "INSERT INTO passkey_uses(challenge, passkey_id, job_id, at) VALUES (?, ?, ?, ?)",
            (challenge, passkey_id, job_id, time.time()),
        )
        c.execute("UPDATE passkeys SET sign_count = ? WHERE id = ?", (sign_count, passkey_id))

    def insert_passkey_enrolment(self, enrolment: StoredEnrolment) -> None:
        self.connection.execute(
            f"INSERT INTO passkey_enrolments({_ENROLMENT}) VALUES (?, ?, ?, ?, ?, ?)",  # noqa: S608
            (
                enrolment.code_sha256,
                enrolment.owner_id,
                enrolment.created_at,
                enrolment.expires_at,
                enrolment.used_at,
                enrolment.passkey_id,
            ),
        )

    def passkey_enrolment(self, code_sha256: str) -> StoredEnrolment | None:
        row = self.connection.execute(
            f"SELECT {_ENROLMENT} FROM passkey_enrolments WHERE code_sha256 = ?"  # noqa: S608
            + self.for_update,
            (code_sha256,),
        ).fetchone()
        if row is None:
            return None
        return StoredEnrolment(
            code_sha256=row[0],
            owner_id=row[1],
            created_at=float(row[2]),
            expires_at=float(row[3]),
            used_at=None if row[4] is None else float(row[4]),
            passkey_id=row[5],
        )

    def spend_passkey_enrolment(self, code_sha256: str, *, passkey_id: str, at: float) -> None:
        self.connection.execute(
            "UPDATE passkey_enrolments SET used_at = ?, passkey_id = ? WHERE code_sha256 = ?",
            (at, passkey_id, code_sha256),
        )


def _passkey(r: Any) -> StoredPasskey:
    return StoredPasskey(
        id=r[0],
        owner_id=r[1],
        label=r[2],
        public_key=r[3],
        sign_count=int(r[4]),
        rp_id=r[5],
        origin=r[6],
        created_at=float(r[7]),
        revoked_at=None if r[8] is None else float(r[8]),
    )


__all__ = ["PasskeyVerbs"]
