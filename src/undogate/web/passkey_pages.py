"""The passkeys page (SPEC §14): an operator registers and revokes the passkeys that
approve previews, and the preview page's passkey step (the request options the Confirm
button signs with).

WebAuthn needs the page's origin: ``server.public_url`` when set, else the origin the
request came to. The relying party id is that origin's host (``localhost`` counts as
a secure context over plain http; an IP address cannot be a relying party id). A
registration keeps the origin and relying party it was made on, and an approval must
come from the same. The page's CSP allows no fetch: the options are rendered into the
page, and the browser's answer goes back in an ordinary form.

A registration's challenge is stored nowhere (sessions live in the ledger, shared by
every process): it is an HMAC, keyed by the session's cookie value, of the time the
page was made, which the form carries back. Only that session can answer it, and only
for ``REGISTRATION_TTL_S``; a registration answered twice is refused as registered
already.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

from ..auth import Principal
from ..errors import InvalidRequest
from ..passkeys import registration_options, request_options, verify_registration
from ..service import Service, Writer
from .sessions import Session

Form = Mapping[str, str]
MAX_LABEL_CHARS = 80
REGISTRATION_TTL_S = 10 * 60.0


@dataclass(frozen=True)
class ConfirmStep:
    """What the preview page needs to ask for the passkey: the request options (JSON,
    rendered into a data attribute), or why it cannot (no live passkey)."""

    options: str | None


def web_origin(request: Request, public_url: str | None) -> tuple[str, str]:
    """(origin, relying party id) of the review pages as the browser sees them."""
    parts = urlsplit(public_url) if public_url else None
    if parts is not None and parts.scheme and parts.netloc:
        return f"{parts.scheme}://{parts.netloc}", parts.hostname or ""
    return f"{request.url.scheme}://{request.url.netloc}", request.url.hostname or ""


class PasskeyPages:
    """The passkeys page and the preview page's passkey step, over the service."""

    def __init__(
        self,
        service: Service,
        render: Callable[..., Response],
        redirect: Callable[[str], Response],
        notify: Callable[[Session, str], Awaitable[None]],
    ) -> None:
        self.service = service
        self.render = render
        self.redirect = redirect
        self.notify = notify

    def _origin(self, request: Request) -> tuple[str, str]:
        return web_origin(request, self.service.config.server.public_url)

    async def page(
        self, request: Request, session: Session, form: Form, writer: Writer
    ) -> Response:
        principal = writer.principal
        passkeys = await self.service.reviewers.passkeys(writer)
        _, rp_id = self._origin(request)
        issued = str(int(self.service.clock()))
        options = registration_options(
            rp_id=rp_id,
            owner_id=principal.owner_id,
            label=principal.credential_id,
            existing=[p.id for p in passkeys if p.revoked_at is None],
            challenge=registration_challenge(session, issued),
        )
        return self.render(
            "passkeys.html",
            session,
            passkeys=passkeys,
            options=options,
            rp_id=rp_id,
            issued=issued,
        )

    async def register(
        self, request: Request, session: Session, form: Form, writer: Writer
    ) -> Response:
        issued = form.get("issued", "")
        age = self.service.clock() - int(issued) if issued.isascii() and issued.isdigit() else -1
        if not 0 <= age <= REGISTRATION_TTL_S:
            raise InvalidRequest("this registration is out of date; open the passkeys page again")
        challenge = registration_challenge(session, issued)
        label = form.get("label", "").strip() or "passkey"
        if len(label) > MAX_LABEL_CHARS:
            raise InvalidRequest(f"a passkey's name is at most {MAX_LABEL_CHARS} characters")
        origin, rp_id = self._origin(request)
        registered = verify_registration(
            form.get("credential", ""), challenge=challenge, rp_id=rp_id, origin=origin
        )
        await self.service.reviewers.register_passkey(
            writer, registered, label=label, rp_id=rp_id, origin=origin
        )
        await self.notify(
            session, f"Passkey “{label}” registered. Previews that need it ask for it now."
        )
        return self.redirect("/passkeys")

    async def revoke(
        self, request: Request, session: Session, form: Form, writer: Writer
    ) -> Response:
        await self.service.reviewers.revoke_passkey(writer, str(request.path_params["passkey_id"]))
        await self.notify(session, "Passkey revoked: it approves nothing from now on.")
        return self.redirect("/passkeys")

    async def confirm_step(
        self, request: Request, principal: Principal, passkey_challenge: str | None
    ) -> ConfirmStep | None:
        """The passkey step of a form that confirms a preview or accepts a verified undo
        (its ``passkey_challenge``); None when it needs no passkey (or this key cannot
        confirm at all)."""
        writer = Writer.may(principal, "web")
        if passkey_challenge is None or writer is None:
            return None
        _, rp_id = self._origin(request)
        passkeys = await self.service.reviewers.passkeys(writer)
        live = [p.id for p in passkeys if p.revoked_at is None]
        if not live:
            return ConfirmStep(options=None)
        challenge = _unb64(passkey_challenge)
        return ConfirmStep(
            options=request_options(rp_id=rp_id, challenge=challenge, credentials=live)
        )


def registration_challenge(session: Session, issued: str) -> bytes:
    """The challenge of a registration the passkeys page offered at ``issued``."""
    message = f"undogate passkey registration {issued}".encode()
    return hmac.new(session.sid.encode(), message, hashlib.sha256).digest()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


__all__ = ["ConfirmStep", "PasskeyPages", "web_origin"]
