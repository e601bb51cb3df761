"""The ledger-wide counters (``meta`` rows), in the SQL both engines speak: the jobs
and payload bytes the limits bound, and the operation sequence. Each update is one
statement that returns the new value; on PostgreSQL it holds the row to the commit, so
a write that updates one does it last (``count_job``).

A counter is kept as text and added as a ``BIGINT``: 64 bits on both engines (SQLite's
``INTEGER`` is too, PostgreSQL's is 32, and payload bytes pass 2^31 at 2 GiB)."""

from __future__ import annotations

from .records import LedgerUsage
from .sql_base import Cursor, EngineHooks


class CounterVerbs(EngineHooks):
    """The counters, on one connection inside the transaction the store opened."""

    def counter(self, key: str) -> int:
        row = self.connection.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return int(row[0]) if row else 0

    def _bump(self, key: str, by: int) -> Cursor:
        """Add ``by`` to a counter, in one statement; its new value is the cursor's row."""
        return self.connection.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = CAST(CAST(meta.value AS BIGINT) + ? AS TEXT) "
            "RETURNING value",
            (key, str(by), by),
        )

    def usage(self) -> LedgerUsage:
        counts = dict(
            self.connection.execute(
                "SELECT key, value FROM meta WHERE key IN (?, ?)" + self.for_update,  # noqa: S608
                ("job_count", "payload_bytes"),
            ).fetchall()
        )
        return LedgerUsage(
            jobs=int(counts.get("job_count", 0)),
            payload_bytes=int(counts.get("payload_bytes", 0)),
        )

    def count_job(self, payload: int) -> LedgerUsage:
        return usage_after(self._add_job(payload))

    def _add_job(self, payload: int) -> Cursor:
        """The update of ``count_job``, sent; its rows not read yet."""
        return self.connection.execute(
            "INSERT INTO meta(key, value) VALUES ('job_count', '1'), ('payload_bytes', ?) "
            "ON CONFLICT(key) DO UPDATE SET value = "
            "CAST(CAST(meta.value AS BIGINT) + CAST(excluded.value AS BIGINT) AS TEXT) "
            "RETURNING key, value",
            (str(payload),),
        )

    def next_seq(self) -> int:
        return int(self._bump("op_seq", 1).fetchone()[0])


def usage_after(added: Cursor) -> LedgerUsage:
    counts = {str(key): int(value) for key, value in added.fetchall()}
    return LedgerUsage(jobs=counts["job_count"], payload_bytes=counts["payload_bytes"])
