"""The webhook outbox's verbs (docs/webhooks.md), in the SQL both engines speak.

A message is added inside the write whose change it announces (``add_webhook``: a job's
state, or an agent stopped or resumed), so it exists exactly when the change does. The
delivery task then works outside any job write: it reads the due messages
(``due_webhooks``, through the partial index of the pending ones), claims one for the
length of an attempt (``claim_webhook``: of two processes sharing a ledger, one wins;
the second waits for the first's row lock, then finds it no longer due), and records the
attempt's outcome (``record_webhook_attempt``, only while that claim holds). Delivered
and failed messages stay, for operators to see.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from .records import OutboxMessage
from .sql_base import EngineHooks

_COLUMNS = (
    "id, endpoint, event, job_id, agent_id, payload, status, attempts, next_attempt_at, "
    "last_response_status, last_error, created_at, updated_at"
)


class OutboxVerbs(EngineHooks):
    """The outbox, on one connection inside the transaction the store opened."""

    def add_webhook(
        self,
        *,
        message_id: str,
        endpoint: str,
        event: str,
        owner_id: str,
        job_id: str | None,
        agent_id: str,
        payload: str,
    ) -> None:
        now = time.time()
        self.connection.execute(
            "INSERT INTO webhook_outbox(id, endpoint, event, owner_id, job_id, agent_id, "
            "payload, status, attempts, next_attempt_at, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?, ?)",
            (message_id, endpoint, event, owner_id, job_id, agent_id, payload, now, now, now),
        )

    def due_webhooks(self, now: float, limit: int) -> list[OutboxMessage]:
        # Spelled as the partial index ``webhook_outbox_due`` spells its WHERE.
        rows = self.connection.execute(
            f"SELECT {_COLUMNS} FROM webhook_outbox "  # noqa: S608 - constant columns
            "WHERE status = 'pending' AND next_attempt_at <= ? "
            "ORDER BY next_attempt_at LIMIT ?",
            (now, limit),
        ).fetchall()
        return [_message(r) for r in rows]

    def claim_webhook(self, message_id: str, *, now: float, until: float) -> bool:
        rows = self.connection.execute(
            "UPDATE webhook_outbox SET next_attempt_at = ? "
            "WHERE id = ? AND status = 'pending' AND next_attempt_at <= ? RETURNING id",
            (until, message_id, now),
        ).fetchall()
        return bool(rows)

    def record_webhook_attempt(
        self,
        message_id: str,
        *,
        claimed_until: float,
        status: Literal["pending", "delivered", "failed"],
        next_attempt_at: float,
        response_status: int | None,
        error: str | None,
    ) -> bool:
        # The claim's expiry is its fence: a claim that ran out and was taken over has
        # another expiry now, so a late outcome cannot overwrite the newer attempt's.
        rows = self.connection.execute(
            "UPDATE webhook_outbox SET status = ?, attempts = attempts + 1, "
            "next_attempt_at = ?, last_response_status = ?, last_error = ?, updated_at = ? "
            "WHERE id = ? AND status = 'pending' AND next_attempt_at = ? RETURNING id",
            (
                status,
                next_attempt_at,
                response_status,
                error,
                time.time(),
                message_id,
                claimed_until,
            ),
        ).fetchall()
        return bool(rows)

    def webhook_messages(
        self,
        owner_id: str,
        agents: tuple[str, ...],
        *,
        status: str | None = None,
        limit: int = 100,
    ) -> list[OutboxMessage]:
        if not agents:
            return []
        marks = ", ".join("?" for _ in agents)
        where = f"owner_id = ? AND agent_id IN ({marks})" + (" AND status = ?" if status else "")
        params: tuple[Any, ...] = (owner_id, *agents, *((status,) if status else ()), limit)
        # Through ``webhook_outbox_by_owner``: the owner's messages, newest first.
        rows = self.connection.execute(
            f"SELECT {_COLUMNS} FROM webhook_outbox "  # noqa: S608 - constant columns
            f"WHERE {where} ORDER BY seq DESC LIMIT ?",
            params,
        ).fetchall()
        return [_message(r) for r in rows]


def _message(row: tuple[Any, ...]) -> OutboxMessage:
    return OutboxMessage(
        id=row[0],
        endpoint=row[1],
        event=row[2],
        job_id=row[3],
        agent_id=row[4],
        payload=row[5],
        status=row[6],
        attempts=int(row[7]),
        next_attempt_at=float(row[8]),
        last_response_status=None if row[9] is None else int(row[9]),
        last_error=row[10],
        created_at=float(row[11]),
        updated_at=float(row[12]),
    )
