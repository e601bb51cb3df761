"""The one door, and the one factory that builds it.

``Service(context, keyring)`` is what every surface holds: the authentication, and a
desk per audience (``agents``, ``reviewers``, ``rewinds``, ``administrators``) whose verbs call the
operations directly. ``open_service`` opens the ledger and the HTTP client a config
names, builds the ``Context`` and the ``Keyring`` over them and hands back the service;
``undogate serve``, the CLI's direct verbs and ``make demo`` all open it so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from ..auth import Keyring
from ..config import Config
from ..ledger import OperatingFigures, open_store
from ..net import PinnedClient
from ..operations.context import Context, crash_point_from_env
from ..operations.recovery import recover
from .access import Authentication, in_thread
from .administrators import Administrators
from .agents import Agents
from .reviewers import Reviewers
from .rewinds import Rewinds


class Service:
    """The gateway's parts as every surface may use them, split by audience."""

    def __init__(self, context: Context, keyring: Keyring) -> None:
        self.context = context
        self.keyring = keyring
        self.access = Authentication(keyring)
        self.agents = Agents(context)
        self.reviewers = Reviewers(context, keyring)
        self.administrators = Administrators(context, keyring)
        self.rewinds = Rewinds(context, keyring)

    @property
    def config(self) -> Config:
        return self.context.config

    def clock(self) -> float:
        return self.context.clock()

    async def operating_figures(self) -> OperatingFigures:
        """What the ledger shows an operator now (``GET /metrics``); the surface decides
        who may see it (an administrator, or whoever reaches the loopback bind)."""
        return await in_thread(self.context.ledger.read, lambda tx: tx.operating_figures())

    def recover(self) -> dict[str, int]:
        """Start-up recovery (see ``operations.recovery.recover``)."""
        return recover(self.context.ledger, self.context.config)


def known_agents(config: Config) -> Callable[[], set[str]]:
    return lambda: {a.id for a in config.agents}


@contextmanager
def open_service(
    config: Config, environ: Mapping[str, str], *, new_ledger: bool = False
) -> Iterator[Service]:
    """Own the ledger the config names, open the HTTP client, build the service; closes
    both. ``new_ledger`` replaces a lost ledger (see ``Ledger.open``).

    Raises:
        LedgerInUse, LedgerError (LedgerMissing, LedgerForeign: the data dir remembers
        another ledger), InvalidRequest (a short master key, or ``new_ledger`` on a
        ledger that is whole).
    """
    ledger = open_store(config.server, new_ledger=new_ledger)
    # The ledger is closed (its lease ended) whatever stops the rest, a SIGTERM landing
    # while the client loads its certificates included.
    try:
        http = PinnedClient(
            request_timeout_s=config.server.request_timeout_s, ca_bundle=config.server.ca_bundle
        )
        try:
            context = Context(
                config=config,
                ledger=ledger,
                http=http,
                environ=environ,
                crash_at=crash_point_from_env(environ),
            )
            keyring = Keyring.from_environ(ledger, environ, known_agents(config))
            yield Service(context, keyring)
        finally:
            http.close()
    finally:
        ledger.close()


__all__ = ["Service", "known_agents", "open_service"]
