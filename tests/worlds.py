"""The worlds tests run in, typed, and one helper per verb.

- ``LocalGateway``: the operations in process over one ``Context`` (a real ledger under
  ``tmp_path`` or PostgreSQL, the real HTTP client), driven as the surfaces drive them:
  jobs by id, each loaded once per verb.
- ``ApiWorld``: that gateway's ``Service`` behind the real ASGI app, with a key of every
  kind (the ``api_world`` fixture).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette

from undogate.api import create_app
from undogate.auth import Keyring
from undogate.contract_server import ContractServer
from undogate.jobs import Actor, Confirmation, Job, Operation, Prepared, PrepareRequest, Preview
from undogate.operations.confirm import confirm_preview
from undogate.operations.context import Context
from undogate.operations.prepare import prepare_job
from undogate.operations.preview import preview_job
from undogate.operations.recovery import recover
from undogate.operations.reject import reject_job
from undogate.service import Service
from undogate.web import WebSettings, WebUI


class LocalGateway(Context):
    """A ``Context`` with the verbs tests call most, by job id."""

    def prepare(self, actor: Actor, agent_id: str, request: PrepareRequest) -> Prepared:
        return prepare_job(self, actor, agent_id, request)

    def preview(self, actor: Actor, job_id: str, operation: Operation) -> Preview:
        return preview_job(self, actor, self.get_job(actor.owner_id, job_id), operation)

    def confirm(self, actor: Actor, job_id: str, token: str, **options: Any) -> Confirmation:
        """``options``: as ``confirm_preview`` takes them (``dry_run``, ...)."""
        job = self.get_job(actor.owner_id, job_id)
        return confirm_preview(self, actor, job, token, **options)

    def reject(self, actor: Actor, job_id: str, reason: str | None = None) -> Job:
        return reject_job(self, actor, self.get_job(actor.owner_id, job_id), reason)

    def recover(self) -> dict[str, int]:
        return recover(self.ledger, self.config)


def review_app(service: Service, settings: WebSettings | None = None) -> Starlette:
    """The API and the review pages over ``service``, as ``serve`` mounts them (without
    ``/mcp``)."""
    pages = WebUI(service, settings or WebSettings(), service.context.ledger)
    return create_app(service, routes=pages.routes())


@dataclass
class ApiWorld:
    """The API over a real ledger: ``keys`` by role (``none`` sends no key)."""

    gateway: LocalGateway
    keyring: Keyring
    service: Service
    app: Starlette
    server: ContractServer
    keys: dict[str, str | None]
    owner_id: str
    reader_id: str


__all__ = ["ApiWorld", "LocalGateway", "review_app"]
