"""Review sessions: an opaque random id in a cookie, everything else in the ledger.

The cookie carries only ``secrets.token_urlsafe(32)``; the ledger keys sessions by the
SHA-256 of that id, so it holds nothing a browser could present. A session remembers
which credential signed in (never the key), the previews it made (their single-use
tokens sealed with a key only the cookie value gives: ``held_previews``) and a one-shot
notice for the next page. Its CSRF token is derived from the cookie value, so it is
stored nowhere.

Sessions live in the ledger (docs/scaling.md): every gateway process sees them, and a restart
keeps them. Whether the credential is still valid is not the store's business: the
views re-check it through the ``Keyring`` on every request.

Every method reads or writes the ledger: call it off the event loop.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..auth import Principal
from ..digests import sha256_hex
from ..jobs import Preview
from ..ledger import Store, StoredWebPreview, StoredWebSession, Transaction
from .held_previews import held_from_text, held_text, seal, unseal

MAX_PREVIEWS_PER_SESSION = 16
SIGNIN_TOKEN_TTL_S = 30 * 60.0
_MAX_SID_CHARS = 200


@dataclass
class HeldPreview:
    """A preview the reviewer made in this session, shown at its own URL."""

    job_id: str
    preview: Preview  # with the exact writes confirming it sends (``Preview.requests``)


@dataclass(slots=True)
class Session:
    """One request's view of a session. ``sid`` (the cookie value) lives only here.

    The notice read with it is private, and the class has slots, so a view cannot set
    one on this object, where no other request would see it: a notice for the next page
    goes through ``SessionStore.notify``, into the ledger."""

    sid: str
    credential_id: str
    created_at: float
    last_seen: float
    _notice: str | None = None
    # The operator who signed in: re-checked by the views on every request (only
    # operator keys sign in, and an operator's id is its owner id).
    principal: Principal = field(init=False)

    def __post_init__(self) -> None:
        self.principal = Principal(self.credential_id, "operator", owner_id=self.credential_id)

    @property
    def id_hash(self) -> str:
        return sha256_hex(self.sid)

    @property
    def csrf_token(self) -> str:
        return hmac.new(self.sid.encode(), b"undogate csrf", hashlib.sha256).hexdigest()

    def take_notice(self) -> str | None:
        """The notice this request read (the ledger's copy was cleared when it did)."""
        notice, self._notice = self._notice, None
        return notice

    def csrf_ok(self, presented: str | None) -> bool:
        return bool(presented) and hmac.compare_digest(
            str(presented).encode("utf-8"), self.csrf_token.encode("utf-8")
        )


class SessionStore:
    """Sessions in the ledger, with an idle timeout and an absolute lifetime."""

    def __init__(
        self,
        ledger: Store,
        *,
        idle_s: float,
        absolute_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ledger = ledger
        self.idle_s = idle_s
        self.absolute_s = absolute_s
        self.clock = clock

    def create(self, principal: Principal) -> tuple[str, Session]:
        """A new session for ``principal``; returns the cookie value and the session.
        Sessions past their timeouts end on the way."""
        sid = secrets.token_urlsafe(32)
        now = self.clock()
        session = Session(sid, principal.credential_id, now, now)
        session.principal = principal

        def commit(tx: Transaction) -> None:
            tx.end_web_sessions(idle_since=now - self.idle_s, created_before=now - self.absolute_s)
            tx.save_web_session(
                StoredWebSession(session.id_hash, principal.credential_id, now, now)
            )

        self.ledger.write(commit)
        return sid, session

    def get(self, sid: str | None) -> Session | None:
        """The live session for a cookie value, touched, its notice taken; None when
        unknown or expired (an expired one ends)."""
        if not sid or len(sid) > _MAX_SID_CHARS:
            return None
        id_hash = sha256_hex(sid)
        now = self.clock()

        def commit(tx: Transaction) -> Session | None:
            stored = tx.web_session(id_hash)
            if stored is None:
                return None
            if now - stored.last_seen > self.idle_s or now - stored.created_at > self.absolute_s:
                tx.end_web_sessions(id_hash=id_hash)
                return None
            tx.save_web_session(
                StoredWebSession(id_hash, stored.credential_id, stored.created_at, now, None)
            )
            return Session(sid, stored.credential_id, stored.created_at, now, stored.notice)

        return self.ledger.write(commit)

    def notify(self, session: Session, notice: str) -> None:
        """Leave ``notice`` for the session's next page."""
        stored = StoredWebSession(
            session.id_hash, session.credential_id, session.created_at, self.clock(), notice
        )
        self.ledger.write(lambda tx: tx.save_web_session(stored))

    def end(self, sid: str | None) -> None:
        if sid and len(sid) <= _MAX_SID_CHARS:
            id_hash = sha256_hex(sid)
            self.ledger.write(lambda tx: tx.end_web_sessions(id_hash=id_hash))

    def end_for_credential(self, credential_id: str) -> int:
        """End every session of one credential (e.g. when it was found revoked)."""
        return self.ledger.write(lambda tx: tx.end_web_sessions(credential_id=credential_id))

    def hold_preview(
        self,
        session: Session,
        job_id: str,
        preview: Preview,
    ) -> str:
        """Keep ``preview`` (with the requests it would send) under a fresh handle (not
        its token) and return the handle."""
        handle = secrets.token_urlsafe(12)
        held = StoredWebPreview(
            session_hash=session.id_hash,
            handle=handle,
            job_id=job_id,
            preview=held_text(preview),
            sealed_token=seal(session.sid, handle, preview.token) if preview.token else None,
            created_at=self.clock(),
        )
        self.ledger.write(lambda tx: tx.hold_web_preview(held, keep=MAX_PREVIEWS_PER_SESSION))
        return handle

    def held_preview(self, session: Session, handle: str) -> HeldPreview | None:
        if len(handle) > _MAX_SID_CHARS:
            return None
        id_hash = session.id_hash
        held = self.ledger.read(lambda tx: tx.web_preview(id_hash, handle))
        if held is None:
            return None
        token = unseal(session.sid, handle, held.sealed_token) if held.sealed_token else None
        return HeldPreview(held.job_id, held_from_text(held.preview, token))


class SigninTokens:
    """CSRF protection for the sign-in form, before any session exists.

    The form carries ``nonce.issued.mac`` and the browser a cookie with the nonce; both
    must match and the MAC must hold, so another site can neither forge the token nor
    make a browser present one it did not get from this server. The MAC key is the
    ledger's (``web_secret``): a form one process made is good at every other.
    """

    def __init__(self, secret: str, clock: Callable[[], float] = time.time) -> None:
        self._key = secret.encode()
        self.clock = clock

    def issue(self) -> tuple[str, str]:
        """Returns (form token, cookie nonce)."""
        nonce = secrets.token_urlsafe(16)
        issued = str(int(self.clock()))
        return f"{nonce}.{issued}.{self._mac(nonce, issued)}", nonce

    def check(self, token: str | None, cookie_nonce: str | None) -> bool:
        if not token or not cookie_nonce or len(token) > 300:
            return False
        parts = token.split(".")
        if len(parts) != 3 or not parts[1].isascii() or not parts[1].isdigit():
            return False
        nonce, issued, mac = parts
        # Bytes, not str: compare_digest refuses non-ASCII str (a 500, not a refusal).
        if not hmac.compare_digest(mac.encode(), self._mac(nonce, issued).encode()):
            return False
        if not hmac.compare_digest(nonce.encode(), cookie_nonce.encode()):
            return False
        return 0 <= self.clock() - int(issued) <= SIGNIN_TOKEN_TTL_S

    def _mac(self, nonce: str, issued: str) -> str:
        return hmac.new(self._key, f"{nonce}.{issued}".encode(), hashlib.sha256).hexdigest()


__all__ = ["HeldPreview", "Session", "SessionStore", "SigninTokens"]
