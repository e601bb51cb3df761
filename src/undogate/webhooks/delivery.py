"""The delivery task: sends what the webhook outbox holds, outside every job write.

One daemon thread per ``undogate serve`` process (each worker of ``serve --workers``
runs its own) wakes every ``poll_s``, reads the due messages, and for each one: claims
it for its attempt's time limit and a margin (one short write, so two processes sharing
a ledger never both send an attempt while a claim holds; an outcome is recorded only
while its claim holds), signs it (Standard Webhooks), POSTs it through ``PinnedClient``
(the address policy, no redirects, no proxies, a time limit), and records the
outcome. A 2xx delivers it, whatever follows the status (the body is never read, so a
long or endless one neither delays nor fails it); anything else (a refused address, a
receiver that is down, a 500, a redirect) is a failed attempt, retried after
``first_retry_s`` doubling up to ``max_retry_s``, and marked ``failed`` after
``max_attempts``. Every failed attempt is logged with the endpoint's id and the reason,
never its URL, its host (the URL may be a secret, and its host or address say where it
points) or its secret. A write never waits for any of this: the outbox row was committed
with it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from ..errors import BlockedAddress, UndogateError
from ..ledger import OutboxMessage, Store
from ..net import NetworkFlags, PinnedClient, TransportFailure, url_host
from .settings import WebhookEndpoint, WebhookSettings
from .signing import BadSecret, secret_key, sign

log = logging.getLogger(__name__)

#: How many due messages one pass reads.
BATCH = 50
#: A claim outlives its attempt's time limit by this much (time to record the outcome),
#: so a process that dies mid-attempt leaves the message to another, or to itself after a
#: restart, soon after.
CLAIM_MARGIN_S = 5.0
USER_AGENT = "undogate-webhooks"


@dataclass(frozen=True)
class Attempt:
    """One attempt's outcome: delivered, or why not (a sentence with no secret)."""

    delivered: bool
    response_status: int | None = None
    error: str | None = None
    #: no answer came (down, refused, timed out): the pass skips the receiver's other
    #: messages, so one dead receiver costs a pass one time limit, not one per message
    unreachable: bool = False


def webhook_warnings(settings: WebhookSettings, environ: Mapping[str, str]) -> list[str]:
    """One start-up warning per endpoint whose secret variable is unset or malformed
    (names, never values): its messages fail until it is set."""
    warnings = []
    for endpoint in settings.endpoints:
        problem = _secret_problem(endpoint, environ)
        if problem is not None:
            warnings.append(
                f"warning: webhook {endpoint.id}: {problem}, so its messages cannot be "
                "signed and will be marked failed after their retries"
            )
    return warnings


def _secret_problem(endpoint: WebhookEndpoint, environ: Mapping[str, str]) -> str | None:
    secret = environ.get(endpoint.secret_env)
    if not secret:
        return f"its secret variable {endpoint.secret_env} is not set"
    try:
        secret_key(secret)
    except BadSecret as exc:
        return f"its secret variable {endpoint.secret_env} is malformed ({exc})"
    return None


def _refused(exc: BlockedAddress) -> str:
    """Why the policy refused an endpoint, by the class of its address alone: the
    policy's own sentence names the host and the address."""
    category = exc.details.get("category")
    if not isinstance(category, str):
        return "refused by the network policy: its URL breaks the address rules"
    article = "an" if category[:1] in "aeiou" else "a"
    return f"refused by the network policy: its host has {article} {category} address"


def _without_host(reason: str, url: str) -> str:
    """A transport failure's reason with the endpoint's host (named when it did not
    resolve) taken out."""
    host = url_host(url)
    return reason.replace(host, "its host") if host else reason


def _about(message: OutboxMessage) -> str:
    """What a message is about, for the log: its job, or its agent."""
    return f"job {message.job_id}" if message.job_id is not None else f"agent {message.agent_id}"


class WebhookDelivery:
    """The background task that empties the outbox (``start``, ``stop``); ``deliver_due``
    runs one pass, for tests and for the task itself."""

    def __init__(
        self,
        settings: WebhookSettings,
        ledger: Store,
        http: PinnedClient,
        environ: Mapping[str, str],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.ledger = ledger
        self.http = http
        self.environ = environ
        self.clock = clock
        self._endpoints = {e.id: e for e in settings.endpoints}
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="undogate-webhooks", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stopping.wait(self.settings.poll_s):
            try:
                self.deliver_due()
            except UndogateError as exc:  # the ledger refused: try again next pass
                log.warning("webhook delivery paused: %s", exc.message)
            except Exception as exc:  # never its message: it might carry an endpoint's URL
                log.error(
                    "webhook delivery failed unexpectedly (%s); trying again next pass",
                    type(exc).__name__,
                )

    def deliver_due(self) -> int:
        """Attempt every message due now, but after a receiver gave no answer none of
        its others this pass (they stay due for the next); returns how many were
        attempted."""
        now = self.clock()
        due = self.ledger.read(lambda r: r.due_webhooks(now, BATCH))
        attempted = 0
        unreachable: set[str] = set()
        for message in due:
            if self._stopping.is_set():
                break
            if message.endpoint in unreachable:
                continue
            attempt = self._deliver(message)
            if attempt is not None:
                attempted += 1
                if attempt.unreachable:
                    unreachable.add(message.endpoint)
        return attempted

    def _deliver(self, message: OutboxMessage) -> Attempt | None:
        """One attempt, or None when another process holds the message."""
        now = self.clock()
        until = now + self.settings.timeout_s + CLAIM_MARGIN_S
        if not self.ledger.write(lambda tx: tx.claim_webhook(message.id, now=now, until=until)):
            return None
        endpoint = self._endpoints.get(message.endpoint)
        if endpoint is None:
            attempt = Attempt(False, error="its endpoint is no longer in the config")
            self._record(message, attempt, until, give_up=True)
            return attempt
        attempt = self._send(endpoint, message)
        self._record(message, attempt, until, give_up=False)
        return attempt

    def _send(self, endpoint: WebhookEndpoint, message: OutboxMessage) -> Attempt:
        problem = _secret_problem(endpoint, self.environ)
        if problem is not None:
            return Attempt(False, error=problem)
        key = secret_key(self.environ[endpoint.secret_env])
        body = message.payload.encode("utf-8")
        timestamp = int(self.clock())
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "webhook-id": message.id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": sign(key, message.id, timestamp, body),
        }
        flags = NetworkFlags(
            allow_private_host=endpoint.allow_private_host,
            allow_loopback_http=endpoint.allow_loopback_http,
        )
        try:
            response = self.http.send(
                "POST",
                endpoint.url,
                headers=headers,
                content=body,
                flags=flags,
                deadline=time.monotonic() + self.settings.timeout_s,
                fresh_connection=True,
                read_body=False,
            )
        except BlockedAddress as exc:
            return Attempt(False, error=_refused(exc))
        except TransportFailure as exc:
            reason = _without_host(exc.reason, endpoint.url)
            return Attempt(False, error=f"not delivered: {reason}", unreachable=True)
        if 200 <= response.status < 300:
            return Attempt(True, response_status=response.status)
        return Attempt(
            False,
            response_status=response.status,
            error=f"the receiver answered HTTP {response.status}",
        )

    def _record(
        self, message: OutboxMessage, attempt: Attempt, claimed_until: float, *, give_up: bool
    ) -> None:
        attempts = message.attempts + 1
        status: Literal["pending", "delivered", "failed"]
        next_at = self.clock()
        if attempt.delivered:
            status = "delivered"
        elif give_up or attempts >= self.settings.max_attempts:
            status = "failed"
            log.warning(
                "webhook %s (%s, %s) to endpoint %s failed for good after %d attempt(s): %s",
                message.id,
                message.event,
                _about(message),
                message.endpoint,
                attempts,
                attempt.error,
            )
        else:
            status = "pending"
            delay = self.settings.retry_delay(attempts)
            next_at += delay
            log.warning(
                "webhook %s (%s, %s) to endpoint %s: attempt %d of %d failed: %s; "
                "retrying in %.3g s",
                message.id,
                message.event,
                _about(message),
                message.endpoint,
                attempts,
                self.settings.max_attempts,
                attempt.error,
                delay,
            )
        recorded = self.ledger.write(
            lambda tx: tx.record_webhook_attempt(
                message.id,
                claimed_until=claimed_until,
                status=status,
                next_attempt_at=next_at,
                response_status=attempt.response_status,
                error=attempt.error,
            )
        )
        if not recorded:
            # Its claim ran out mid-attempt and another attempt holds the message now:
            # that one's outcome counts (the receiver may see both: same webhook-id).
            log.warning(
                "webhook %s (%s, %s) to endpoint %s: the attempt outlived its claim; "
                "its outcome is not recorded (another attempt took the message over)",
                message.id,
                message.event,
                _about(message),
                message.endpoint,
            )


__all__ = ["WebhookDelivery", "webhook_warnings"]
