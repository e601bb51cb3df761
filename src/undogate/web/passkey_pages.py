"""The passkeys page (docs/proof.md): an operator enrols, adds and revokes the passkeys that
approve previews, and the preview page's passkey step (the request options the Confirm
button signs with).

Who may change an owner's passkeys is the service's rule (``operations/owner_passkeys``):
the first passkey is enrolled with a one-time code printed on the server's host, which
this page asks for; another is added, and any is revoked, only with the approval of a
live passkey of the owner over exactly that act. Adding one is two steps: the browser
makes the new passkey (``add``), then a live one approves exactly it (the page ``add``
answers with), and the form goes to ``register`` with that approval.

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
import ipaddress
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..auth import Principal
from ..errors import InvalidRequest
from ..passkeys import (
    Addition,
    Approval,
    registration_options,
    request_options,
    verify_registration,
)
from ..service import Service, Writer
from .sessions import Session

Form = Mapping[str, str]
View = Callable[[Request, Session, Form, Writer], Awaitable[Response]]


class Gate(Protocol):
    """The UI's gate (``WebUI._get``, ``_post``), as these pages use it: for a Writer."""

    def __call__(
        self, view: View, needs: type[Writer]
    ) -> Callable[[Request], Awaitable[Response]]: ...


MAX_LABEL_CHARS = 80
REGISTRATION_TTL_S = 10 * 60.0


@dataclass(frozen=True)
class ConfirmStep:
    """What the preview page needs to ask for the passkey: the request options (JSON,
    rendered into a data attribute), or why it cannot (no live passkey)."""

    options: str | None
    # Why no passkey can work at this address (an IP address), and the one that does.
    site_problem: str | None = None
    working_url: str | None = None


@dataclass(frozen=True)
class PasskeySite:
    """Whether the page's address can be a passkey's site: an IP address cannot
    (WebAuthn needs a domain name; ``localhost`` counts, over plain http too)."""

    problem: str | None
    working_url: str | None


def passkey_site(request: Request, public_url: str | None) -> PasskeySite:
    """For the page ``request`` asked for: what is wrong with its address for a passkey,
    and the same page at an address that works (``localhost`` on the same port for a
    loopback address; for another address, a name set as ``server.public_url``)."""
    origin, rp_id = web_origin(request, public_url)
    try:
        address = ipaddress.ip_address(rp_id.strip("[]"))
    except ValueError:
        return PasskeySite(None, None)
    problem = (
        f"{rp_id} is an IP address, and an IP address cannot be a passkey's site "
        "(browsers accept only a domain name, such as localhost)."
    )
    if not address.is_loopback:
        return PasskeySite(
            problem + " Give undogate a domain name in server.public_url and open it there.",
            None,
        )
    port = urlsplit(origin).port
    netloc = f"localhost:{port}" if port else "localhost"
    return PasskeySite(problem, f"{urlsplit(origin).scheme}://{netloc}{request.url.path}")


@dataclass(frozen=True)
class Revoking:
    """One live passkey's Revoke button: the request options of its approval."""

    options: str
    expires_at_ms: int


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

    def routes(self, get: Gate, post: Gate) -> list[BaseRoute]:
        """The passkeys page's routes, through the UI's session and cross-site checks:
        an operator's own passkeys are a ``Writer``'s."""
        return [
            Route("/passkeys", get(self.page, Writer), methods=["GET"]),
            Route("/passkeys", post(self.register, Writer), methods=["POST"]),
            Route("/passkeys/add", post(self.add, Writer), methods=["POST"]),
            Route("/passkeys/{passkey_id}/revoke", post(self.revoke, Writer), methods=["POST"]),
        ]

    def _origin(self, request: Request) -> tuple[str, str]:
        return web_origin(request, self.service.config.server.public_url)

    async def page(
        self, request: Request, session: Session, form: Form, writer: Writer
    ) -> Response:
        principal = writer.principal
        passkeys = await self.service.reviewers.passkeys(writer)
        live = [p.id for p in passkeys if p.revoked_at is None]
        _, rp_id = self._origin(request)
        issued = str(int(self.service.clock()))
        options = registration_options(
            rp_id=rp_id,
            owner_id=principal.owner_id,
            label=principal.credential_id,
            existing=live,
            challenge=registration_challenge(session, issued),
        )
        revoking = {p: self._approving(rp_id, live, writer, p) for p in live}
        return self.render(
            "passkeys.html",
            session,
            passkeys=passkeys,
            live=live,
            revoking=revoking,
            options=options,
            rp_id=rp_id,
            issued=issued,
            site=passkey_site(request, self.service.config.server.public_url),
        )

    def _approving(self, rp_id: str, live: list[str], writer: Writer, passkey_id: str) -> Revoking:
        asked = self.service.reviewers.passkey_challenge(writer, passkey_id)
        options = request_options(rp_id=rp_id, challenge=_unb64(asked.challenge), credentials=live)
        return Revoking(options, asked.expires_at_ms)

    def _addition(self, request: Request, session: Session, form: Form) -> Addition:
        """The registration the form carries, verified against its page's challenge.

        Raises: InvalidRequest (out of date, a bad name, not a credential),
        PasskeyNotVerified."""
        issued = form.get("issued", "")
        age = self.service.clock() - int(issued) if issued.isascii() and issued.isdigit() else -1
        if not 0 <= age <= REGISTRATION_TTL_S:
            raise InvalidRequest("this registration is out of date; open the passkeys page again")
        label = form.get("label", "").strip() or "passkey"
        if len(label) > MAX_LABEL_CHARS:
            raise InvalidRequest(f"a passkey's name is at most {MAX_LABEL_CHARS} characters")
        origin, rp_id = self._origin(request)
        registered = verify_registration(
            form.get("credential", ""),
            challenge=registration_challenge(session, issued),
            rp_id=rp_id,
            origin=origin,
        )
        return Addition(registered, label, rp_id, origin)

    async def register(
        self, request: Request, session: Session, form: Form, writer: Writer
    ) -> Response:
        """Keep the passkey the form carries: a first one with its enrolment code,
        another with the approval ``add`` asked for."""
        addition = self._addition(request, session, form)
        await self.service.reviewers.register_passkey(
            writer,
            addition,
            enrolment_code=form.get("enrolment_code") or None,
            approval=form_approval(form),
        )
        await self.notify(
            session, f"Passkey “{addition.label}” registered. Previews that need it ask for it now."
        )
        return self.redirect("/passkeys")

    async def add(self, request: Request, session: Session, form: Form, writer: Writer) -> Response:
        """The new passkey the browser made, and the page where a live passkey of the
        owner approves adding exactly it."""
        addition = self._addition(request, session, form)
        passkeys = await self.service.reviewers.passkeys(writer)
        live = [p.id for p in passkeys if p.revoked_at is None]
        asked = self.service.reviewers.passkey_challenge(writer, addition)
        return self.render(
            "passkey_add.html",
            session,
            addition=addition,
            form=form,
            expires_at_ms=asked.expires_at_ms,
            options=request_options(
                rp_id=addition.rp_id, challenge=_unb64(asked.challenge), credentials=live
            ),
        )

    async def revoke(
        self, request: Request, session: Session, form: Form, writer: Writer
    ) -> Response:
        passkey_id = str(request.path_params["passkey_id"])
        await self.service.reviewers.revoke_passkey(writer, passkey_id, form_approval(form))
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
        site = passkey_site(request, self.service.config.server.public_url)
        if site.problem is not None:
            return ConfirmStep(None, site.problem, site.working_url)
        if not live:
            return ConfirmStep(options=None)
        challenge = _unb64(passkey_challenge)
        return ConfirmStep(
            options=request_options(rp_id=rp_id, challenge=challenge, credentials=live)
        )


def form_approval(form: Form) -> Approval | None:
    """The approval of a live passkey a form carries, if any."""
    assertion = form.get("passkey_assertion")
    return Approval(assertion, form_expiry(form)) if assertion else None


def form_expiry(form: Form) -> int | None:
    """The ``passkey_expires_at_ms`` a form carries back from its page (None when there
    is none, or it is not a number: the approval is then refused)."""
    text = form.get("passkey_expires_at_ms", "")
    return int(text) if text.isascii() and text.isdigit() and len(text) < 16 else None


def registration_challenge(session: Session, issued: str) -> bytes:
    """The challenge of a registration the passkeys page offered at ``issued``."""
    message = f"undogate passkey registration {issued}".encode()
    return hmac.new(session.sid.encode(), message, hashlib.sha256).digest()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


__all__ = ["ConfirmStep", "PasskeyPages", "form_approval", "form_expiry", "web_origin"]
