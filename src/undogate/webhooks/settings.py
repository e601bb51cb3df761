"""The ``webhooks:`` section of the config: where notifications go, which events, how
hard to try. Pure: validated at load, no network and no secret (a secret lives in the
environment variable ``secret_env`` names, never in the file).

```yaml
webhooks:
  endpoints:
    - id: ops-chat
      url: https://hooks.example.com/undogate
      secret_env: UNDOGATE_WEBHOOK_SECRET      # holds whsec_<base64>
      events: [job.needs_review, job.applied]  # default: every event
  max_attempts: 8          # then the message is marked failed
  first_retry_s: 5         # doubled after each failed attempt ...
  max_retry_s: 3600        # ... up to this
```
"""

from __future__ import annotations

from pydantic import Field, model_validator

from ..jobs import WEBHOOK_EVENTS
from ..net import NetworkFlags, configured_url_problems
from ..resources import ID_PATTERN, StrictModel

ENV_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"

#: A rewind plan ran (docs/rewind.md).
REWIND_APPLIED = "rewind.applied"
#: A person stopped an agent, or resumed it (docs/rewind.md).
AGENT_STOPPED = "agent.stopped"
AGENT_RESUMED = "agent.resumed"
#: Every event a webhook can subscribe to (Standard Webhooks ``type``): the job states',
#: then a rewind's, then an agent's.
EVENTS = (*WEBHOOK_EVENTS, REWIND_APPLIED, AGENT_STOPPED, AGENT_RESUMED)


class WebhookEndpoint(StrictModel):
    """One receiver. Its URL may itself be a secret (many chat hooks are): it is never
    logged or shown; the endpoint is named by ``id``."""

    id: str = Field(pattern=ID_PATTERN)
    url: str = Field(min_length=1, max_length=2048)
    secret_env: str = Field(pattern=ENV_PATTERN)
    events: tuple[str, ...] = EVENTS
    allow_private_host: bool = False
    allow_loopback_http: bool = False

    def wants(self, event: str) -> bool:
        return event in self.events


class WebhookSettings(StrictModel):
    endpoints: tuple[WebhookEndpoint, ...] = ()
    max_attempts: int = Field(8, ge=1, le=100, strict=True)
    first_retry_s: float = Field(5.0, gt=0)
    max_retry_s: float = Field(3600.0, gt=0)
    # How often the delivery task looks for due messages.
    poll_s: float = Field(1.0, gt=0, le=60)
    # One delivery attempt's time limit.
    timeout_s: float = Field(8.0, gt=0, le=60)

    @model_validator(mode="after")
    def _retry_bounds_in_order(self) -> WebhookSettings:
        if self.max_retry_s < self.first_retry_s:
            raise ValueError("max_retry_s must not be less than first_retry_s")
        return self

    def retry_delay(self, attempts: int) -> float:
        """How long to wait after the ``attempts``-th failed attempt (1, 2, ...)."""
        return float(min(self.max_retry_s, self.first_retry_s * 2 ** (attempts - 1)))

    @property
    def secret_envs(self) -> tuple[str, ...]:
        return tuple(sorted({e.secret_env for e in self.endpoints}))


def webhook_problems(settings: WebhookSettings) -> list[tuple[str, str]]:
    """What the settings get wrong beyond their types: unknown events, duplicate ids,
    and the URL rules of docs/security.md as far as they can be checked without DNS."""
    problems: list[tuple[str, str]] = []
    seen: set[str] = set()
    for i, endpoint in enumerate(settings.endpoints):
        where = f"webhooks.endpoints[{i}]"
        if endpoint.id in seen:
            problems.append((f"{where}.id", f"duplicate endpoint id {endpoint.id!r}"))
        seen.add(endpoint.id)
        if not endpoint.events:
            problems.append((f"{where}.events", "must name at least one event"))
        for j, event in enumerate(endpoint.events):
            if event not in EVENTS:
                problems.append(
                    (f"{where}.events[{j}]", f"unknown event {event!r}; known: {', '.join(EVENTS)}")
                )
        problems.extend((f"{where}.url", p) for p in _url_problems(endpoint))
    return problems


def _url_problems(endpoint: WebhookEndpoint) -> list[str]:
    # The messages never repeat the URL: it may carry a secret path.
    flags = NetworkFlags(
        allow_private_host=endpoint.allow_private_host,
        allow_loopback_http=endpoint.allow_loopback_http,
    )
    return configured_url_problems(
        endpoint.url, flags, userinfo="the signature authenticates the sender"
    )


__all__ = [
    "AGENT_RESUMED",
    "AGENT_STOPPED",
    "EVENTS",
    "REWIND_APPLIED",
    "WebhookEndpoint",
    "WebhookSettings",
    "webhook_problems",
]
