"""The ledger's verbs on review sessions (``web/sessions``), in the SQL both engines
speak. Sessions live in the ledger so every gateway process sees them and a restart
keeps them (docs/scaling.md). They are not history: a session ends by deleting its rows."""

from __future__ import annotations

import secrets

from .records import StoredWebPreview, StoredWebSession
from .sql_base import EngineHooks

#: The meta row of the key every process signs its sign-in forms with.
WEB_SECRET_KEY = "web_secret"  # noqa: S105 - the name of a meta row, not a secret
_SELECT_SESSION = (
    "SELECT id_hash, credential_id, created_at, last_seen, notice FROM web_sessions "
    "WHERE id_hash = ?"
)
_PREVIEW_COLUMNS = "session_hash, handle, job_id, preview, sealed_token, created_at"


class SessionVerbs(EngineHooks):
    """Review sessions and the previews they hold, inside the store's transaction."""

    def web_secret(self) -> str:
        self.connection.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO NOTHING",
            (WEB_SECRET_KEY, secrets.token_hex(32)),
        )
        row = self.connection.execute(
            "SELECT value FROM meta WHERE key = ?", (WEB_SECRET_KEY,)
        ).fetchone()
        return str(row[0])

    def save_web_session(self, session: StoredWebSession) -> None:
        self.connection.execute(
            "INSERT INTO web_sessions(id_hash, credential_id, created_at, last_seen, notice) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT(id_hash) DO UPDATE SET "
            "last_seen = excluded.last_seen, notice = excluded.notice",
            (
                session.id_hash,
                session.credential_id,
                session.created_at,
                session.last_seen,
                session.notice,
            ),
        )

    def web_session(self, id_hash: str) -> StoredWebSession | None:
        row = self.connection.execute(
            _SELECT_SESSION + self.for_update,
            (id_hash,),
        ).fetchone()
        return StoredWebSession(*row) if row else None

    def end_web_sessions(
        self,
        *,
        id_hash: str | None = None,
        credential_id: str | None = None,
        idle_since: float | None = None,
        created_before: float | None = None,
    ) -> int:
        ended = self.connection.execute(
            "DELETE FROM web_sessions WHERE id_hash = ? OR credential_id = ? "
            "OR last_seen < ? OR created_at < ? RETURNING id_hash",
            (id_hash, credential_id, idle_since, created_before),
        ).fetchall()
        gone = [(str(r[0]),) for r in ended]
        self.connection.executemany("DELETE FROM web_session_previews WHERE session_hash = ?", gone)
        return len(gone)

    def hold_web_preview(self, held: StoredWebPreview, *, keep: int) -> None:
        c = self.connection
        c.execute(
            f"INSERT INTO web_session_previews({_PREVIEW_COLUMNS}) "  # noqa: S608
            "VALUES (?, ?, ?, ?, ?, ?)",
            (
                held.session_hash,
                held.handle,
                held.job_id,
                held.preview,
                held.sealed_token,
                held.created_at,
            ),
        )
        c.execute(
            "DELETE FROM web_session_previews WHERE session_hash = ? AND handle NOT IN "
            "(SELECT handle FROM web_session_previews WHERE session_hash = ? "
            "ORDER BY created_at DESC, handle LIMIT ?)",
            (held.session_hash, held.session_hash, keep),
        )

    def web_preview(self, session_hash: str, handle: str) -> StoredWebPreview | None:
        row = self.connection.execute(
            f"SELECT {_PREVIEW_COLUMNS} FROM web_session_previews "  # noqa: S608
            "WHERE session_hash = ? AND handle = ?",
            (session_hash, handle),
        ).fetchone()
        return StoredWebPreview(*row) if row else None
