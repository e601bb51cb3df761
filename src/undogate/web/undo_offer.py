"""The review page of a resource's undos offered only once verified (docs/collections.md): what its
test copy verified, what a reviewer accepted, and the form that accepts it, once (with
the reviewer's passkey over exactly that acceptance where the resource requires one,
docs/proof.md)."""

from __future__ import annotations

from typing import Protocol
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from ..auth import WRITE
from ..service import Reader, Writer
from . import pages
from .pages import Form
from .passkey_pages import PasskeyPages, form_expiry
from .sessions import Session


class Pages(pages.Pages, Protocol):
    """What these views use of the review UI: its pages, and its passkey pages."""

    passkey_pages: PasskeyPages


UNDO_WORDS = {
    "undo_of_create": "Undo of a create: DELETE exactly the created record, with If-Match",
    "recreate": "Undo of a delete: re-create the same id from its pre-image, If-None-Match: *",
}


def undo_offer_routes(ui: Pages) -> list[BaseRoute]:
    """``GET`` and ``POST /resources/{resource_id}/undo``, through the UI's session and
    cross-site checks (its ``_get``/``_post``)."""

    async def show(request: Request, session: Session, form: Form, reader: Reader) -> Response:
        resource_id = str(request.path_params["resource_id"])
        offer = await ui.service.reviewers.undo_offer(reader, resource_id)
        return ui.render(
            "undo_offer.html",
            session,
            resource_id=resource_id,
            offer=offer,
            undo_words=UNDO_WORDS,
            can_write=WRITE in session.principal.scopes,
            passkey=await ui.passkey_pages.confirm_step(
                request, session.principal, offer.passkey_challenge
            ),
            passkey_signs="exactly this acceptance (this resource, its check and the undos "
            "it verified)",
            passkey_retry="Try again.",
            passkey_retry_after="reload this page",
        )

    async def accept(request: Request, session: Session, form: Form, writer: Writer) -> Response:
        resource_id = str(request.path_params["resource_id"])
        await ui.service.reviewers.accept_verified_undo(
            writer,
            resource_id,
            passkey_assertion=form.get("passkey_assertion") or None,
            passkey_expires_at_ms=form_expiry(form),
        )
        await ui.notify(session, "Accepted: these verified undos are offered from now on.")
        return ui._redirect(f"/resources/{quote(resource_id, safe='')}/undo")

    path = "/resources/{resource_id}/undo"
    return [
        Route(path, ui._get(show, Reader), methods=["GET"]),
        Route(path, ui._post(accept, Writer), methods=["POST"]),
    ]
