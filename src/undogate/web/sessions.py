"""Review sessions: an opaque random id in a cookie, everything else on the server.

The cookie carries only ``secrets.token_urlsafe(32)``; the store keys sessions by the
SHA-256 of that id, so the store itself holds nothing a browser could present. A session
remembers which credential signed in (never the key), its CSRF token, the previews it
made (their single-use tokens go back to the browser only in a hidden form field) and a
one-shot notice for the next page.

Sessions live in memory: a restart signs everybody out, which is the safe direction.
Whether the credential is still valid is not the store's business: the views re-check it
through the ``Keyring`` on every request.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from ..auth import Principal
from ..digests import sha256_hex
from ..jobs import Preview

MAX_PREVIEWS_PER_SESSION = 16
SIGNIN_TOKEN_TTL_S = 30 * 60.0


@dataclass
class HeldPreview:
    """A preview the reviewer made in this session, shown at its own URL."""

    job_id: str
    preview: Preview


@dataclass
class Session:
    principal: Principal
    csrf_token: str
    created_at: float
    last_seen: float
    previews: OrderedDict[str, HeldPreview] = field(default_factory=OrderedDict)
    notice: str | None = None
    # The challenge of the passkey registration the passkeys page offered last: a
    # registration answers it once (web/passkey_pages.py).
    passkey_challenge: bytes | None = None

    def hold_preview(self, job_id: str, preview: Preview) -> str:
        """Keep ``preview`` under a fresh handle (not its token) and return the handle."""
        handle = secrets.token_urlsafe(12)
        self.previews[handle] = HeldPreview(job_id, preview)
        while len(self.previews) > MAX_PREVIEWS_PER_SESSION:
            self.previews.popitem(last=False)
        return handle

    def take_notice(self) -> str | None:
        notice, self.notice = self.notice, None
        return notice

    def csrf_ok(self, presented: str | None) -> bool:
        return bool(presented) and hmac.compare_digest(
            str(presented).encode("utf-8"), self.csrf_token.encode("utf-8")
        )


class SessionStore:
    """In-memory sessions with an idle timeout and an absolute lifetime."""

    def __init__(
        self,
        *,
        idle_s: float,
        absolute_s: float,
        max_sessions: int = 10_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.idle_s = idle_s
        self.absolute_s = absolute_s
        self.max_sessions = max_sessions
        self.clock = clock
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()

    def create(self, principal: Principal) -> tuple[str, Session]:
        """A new session for ``principal``; returns the cookie value and the session."""
        sid = secrets.token_urlsafe(32)
        now = self.clock()
        session = Session(
            principal=principal,
            csrf_token=secrets.token_urlsafe(32),
            created_at=now,
            last_seen=now,
        )
        with self._lock:
            self._sessions[sha256_hex(sid)] = session
            while len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)
        return sid, session

    def get(self, sid: str | None) -> Session | None:
        """The live session for a cookie value, touched; None when unknown or expired."""
        if not sid or len(sid) > 200:
            return None
        key = sha256_hex(sid)
        now = self.clock()
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                return None
            if now - session.last_seen > self.idle_s or now - session.created_at > self.absolute_s:
                del self._sessions[key]
                return None
            session.last_seen = now
            self._sessions.move_to_end(key)
            return session

    def end(self, sid: str | None) -> None:
        if sid:
            with self._lock:
                self._sessions.pop(sha256_hex(sid), None)

    def end_for_credential(self, credential_id: str) -> int:
        """End every session of one credential (e.g. when it was found revoked)."""
        with self._lock:
            doomed = [
                k for k, s in self._sessions.items() if s.principal.credential_id == credential_id
            ]
            for key in doomed:
                del self._sessions[key]
        return len(doomed)

    def __len__(self) -> int:
        return len(self._sessions)


class SigninTokens:
    """CSRF protection for the sign-in form, before any session exists.

    The form carries ``nonce.issued.mac`` and the browser a cookie with the nonce; both
    must match and the MAC (a per-process secret) must hold, so another site can neither
    forge the token nor make a browser present one it did not get from this server.
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._secret = secrets.token_bytes(32)
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
        return hmac.new(self._secret, f"{nonce}.{issued}".encode(), hashlib.sha256).hexdigest()


__all__ = ["HeldPreview", "Session", "SessionStore", "SigninTokens"]
