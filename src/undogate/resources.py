"""What a resource is as the config declares it, its identity, and the limits on it.

Pure models, below both ``config`` (which loads and checks a whole file) and
``adapters`` (which check what each kind needs of a resource). A resource's ``kind`` is
an opaque key here, and its kind's settings an opaque model: which kinds exist and what
they take is the adapters' registry's business, and ``config`` asks it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cached_property
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .digests import sha256_label

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
_ENV_RE = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
# An HTTP field name (RFC 9110's token), and a value of visible ASCII with inner spaces:
# what HTTP/1.1 carries as written, with nothing for a server to trim.
_HEADER_NAME_RE = r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,64}$"
_HEADER_VALUE_RE = r"^[!-~]([ -~]{0,1022}[!-~])?$"
_MAX_COUNT = 1_000_000_000
_MAX_BYTES = 2**53
# However many records of whatever size the limits allow, one listing is read into memory
# whole: never more than this.
MAX_LISTING_BYTES = 32 * 1024 * 1024
# The validation context key under which ``config`` passes ``KindProblem``.
KINDS_CONTEXT = "kinds"


class StrictModel(BaseModel):
    """Unknown settings are refused; a validated value never changes."""

    # A ``pattern`` is anchored with ``$``: in pydantic-core's Rust engine that is the
    # end of the text, while Python's ``re`` (``python-re``) lets ``"r1\n"`` through.
    model_config = ConfigDict(extra="forbid", frozen=True, regex_engine="rust-regex")


class Limits(StrictModel):
    # Every limit is strict: `true` or `"5"` must never quietly become a limit. The
    # ceilings keep every count far inside a SQLite integer and every size exact in a
    # JSON number.
    max_resources: int = Field(64, ge=1, le=_MAX_COUNT, strict=True)
    max_changes_per_job: int = Field(8, ge=1, le=_MAX_COUNT, strict=True)
    max_fields_per_resource: int = Field(32, ge=1, le=_MAX_COUNT, strict=True)
    max_document_bytes: int = Field(64 * 1024, ge=1, le=_MAX_BYTES, strict=True)
    max_job_bytes: int = Field(2 * 1024 * 1024, ge=1, le=_MAX_BYTES, strict=True)
    max_jobs: int = Field(2000, ge=1, le=_MAX_COUNT, strict=True)
    max_receipt_bytes: int = Field(128 * 1024 * 1024, ge=1, le=_MAX_BYTES, strict=True)
    max_confirm_attempts: int = Field(16, ge=1, le=_MAX_COUNT, strict=True)
    idempotency_days: int = Field(30, ge=1, le=_MAX_COUNT, strict=True)
    # Open streams on /mcp (GET, subscriptions/listen): the gateway never sends on them.
    max_mcp_streams: int = Field(64, ge=1, le=_MAX_COUNT, strict=True)
    max_mcp_streams_per_agent: int = Field(4, ge=1, le=_MAX_COUNT, strict=True)
    mcp_stream_idle_s: float = Field(60.0, gt=0, strict=True)
    # Fair shares (docs/limits.md): an agent here is one agent id as one owner's tokens
    # speak for it.
    max_unresolved_jobs_per_agent: int = Field(100, ge=1, le=_MAX_COUNT, strict=True)
    max_unresolved_jobs_per_owner: int = Field(500, ge=1, le=_MAX_COUNT, strict=True)
    max_prepares_per_minute: int = Field(60, ge=1, le=_MAX_COUNT, strict=True)
    prepare_burst: int = Field(30, ge=1, le=_MAX_COUNT, strict=True)
    # A collection listing (an upsert's lookup, the endpoint check's snapshot) holds at
    # most this many records; a longer one is refused, never truncated.
    max_collection_records: int = Field(1000, ge=1, le=_MAX_COUNT, strict=True)

    @property
    def max_listing_bytes(self) -> int:
        """The most a collection listing may weigh: room for ``max_collection_records``
        records of up to ``max_document_bytes`` each, within ``MAX_LISTING_BYTES``."""
        return min(self.max_collection_records * self.max_document_bytes, MAX_LISTING_BYTES)


class TokenAuth(StrictModel):
    """A token read from one variable, sent as ``Authorization: Bearer`` or ``Basic``
    (the variable then holds ``user:password``)."""

    scheme: Literal["bearer", "basic"]
    token_env: str = Field(pattern=_ENV_RE)

    @property
    def variables(self) -> tuple[str, ...]:
        return (self.token_env,)


class HeaderAuth(StrictModel):
    """A token read from one variable, sent as the value of the header ``name``."""

    scheme: Literal["header"]
    name: str = Field(pattern=_HEADER_NAME_RE)
    token_env: str = Field(pattern=_ENV_RE)

    @property
    def variables(self) -> tuple[str, ...]:
        return (self.token_env,)


class AwsSigV4Auth(StrictModel):
    """Every request signed with AWS Signature Version 4 for ``region`` and ``service``."""

    scheme: Literal["aws_sigv4"]
    region: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,39}$")
    service: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,39}$")
    access_key_env: str = Field(pattern=_ENV_RE)
    secret_key_env: str = Field(pattern=_ENV_RE)
    session_token_env: str | None = Field(None, pattern=_ENV_RE)

    @property
    def variables(self) -> tuple[str, ...]:
        names = (self.access_key_env, self.secret_key_env, self.session_token_env)
        return tuple(name for name in names if name is not None)


class AzureSharedKeyAuth(StrictModel):
    """Every request signed with an Azure Storage account's Shared Key."""

    scheme: Literal["azure_shared_key"]
    # Azure's rule for a storage account's name: 3 to 24 lowercase letters and digits.
    account: str = Field(pattern=r"^[a-z0-9]{3,24}$")
    key_env: str = Field(pattern=_ENV_RE)

    @property
    def variables(self) -> tuple[str, ...]:
        return (self.key_env,)


# How a resource's requests are authenticated: one model per scheme, told apart by
# ``scheme``. What each scheme does with its variables is ``adapters.credentials``'.
Auth = Annotated[
    TokenAuth | HeaderAuth | AwsSigV4Auth | AzureSharedKeyAuth, Field(discriminator="scheme")
]


def _header_pairs(value: Any) -> Any:
    """The YAML's ``{Name: value}`` as (name, value) pairs, in the order written (a
    resource stays hashable); pairs are taken as they are (a dump loaded back)."""
    if isinstance(value, dict):
        return tuple(value.items())
    return value


# Static headers sent with every request to a resource: a mapping in the YAML and in a
# dump, (name, value) pairs inside.
StaticHeaders = Annotated[
    tuple[
        tuple[
            Annotated[str, Field(pattern=_HEADER_NAME_RE)],
            Annotated[str, Field(pattern=_HEADER_VALUE_RE)],
        ],
        ...,
    ],
    BeforeValidator(_header_pairs),
    PlainSerializer(dict, return_type=dict[str, str]),
    Field(max_length=32),
]


class KindSettings(StrictModel):
    """The settings a kind adds to a resource's common ones (flat beside them in the
    YAML). A kind subclasses this with its own keys; ``config`` validates them with
    the kind's model, each problem with its path.
    """

    def fingerprint_part(self) -> dict[str, Any]:
        """What of these settings makes it the same resource (docs/config.md#identity), merged
        into its fingerprint. Unless a kind says otherwise: every one of them."""
        return self.model_dump(mode="json")


class Resource(StrictModel):
    """A resource as the config declares it: the keys every kind shares, and its kind's
    own ``settings`` (opaque here; only the kind reads them). The YAML is flat: the
    kind's keys sit beside the common ones, and a dump puts them back there."""

    id: str = Field(pattern=ID_PATTERN)
    agent_id: str = Field(pattern=ID_PATTERN)
    name: str = Field(min_length=1, max_length=200)
    kind: str
    url: str = Field(min_length=1, max_length=2048)
    token_env: str | None = Field(None, pattern=_ENV_RE)
    token_scheme: Literal["bearer", "basic"] = "bearer"  # noqa: S105 - a scheme name
    # The long form of the credential (``token_env``/``token_scheme`` are its shorthand
    # for bearer and basic), and the headers every request carries as written.
    auth: Auth | None = None
    headers: StaticHeaders = ()
    conditional_writes: bool = False
    allow_private_host: bool = False
    allow_loopback_http: bool = False
    # A disposable test copy of the named resource (docs/remote-contract.md). Not identity:
    # the fingerprint below is unchanged by it.
    test_copy_of: str | None = Field(None, pattern=ID_PATTERN)
    # Confirming a write to it needs the reviewer's passkey over the exact preview
    # (docs/proof.md). Not identity: turning it on invalidates nothing.
    require_passkey: bool = False
    settings: KindSettings = Field(default_factory=KindSettings)

    @model_validator(mode="after")
    def _one_way_to_authenticate(self) -> Resource:
        if self.auth is not None and (
            self.token_env is not None or "token_scheme" in self.model_fields_set
        ):
            raise ValueError(
                "give the credential either as auth or as token_env/token_scheme, not both"
            )
        return self

    @property
    def credential(self) -> Auth | None:
        """How requests to this resource are authenticated (``None``: they are not),
        the shorthand read as the long form it stands for."""
        if self.auth is not None:
            return self.auth
        if self.token_env is None:
            return None
        return TokenAuth(scheme=self.token_scheme, token_env=self.token_env)

    @property
    def credential_variables(self) -> tuple[str, ...]:
        """The names of the environment variables its credential is read from."""
        credential = self.credential
        return () if credential is None else credential.variables

    @field_validator("kind")
    @classmethod
    def _an_installed_kind(cls, value: str, info: ValidationInfo) -> str:
        problem: KindProblem | None = (info.context or {}).get(KINDS_CONTEXT)
        why = problem(value) if problem is not None else None
        if why is not None:
            raise PydanticCustomError("kind", "{why}", {"why": why})
        return value

    @model_serializer(mode="wrap")
    def _flat(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> Any:
        """The kind's settings beside the common keys, as the YAML has them."""
        data = handler(self)
        if isinstance(data, dict):
            data.pop("settings", None)
            if self.auth is not None:  # the long form stands alone
                data.pop("token_env", None)
                data.pop("token_scheme", None)
            data.update(
                self.settings.model_dump(
                    mode=info.mode,
                    exclude_none=info.exclude_none,
                    exclude_defaults=info.exclude_defaults,
                )
            )
        return data

    @cached_property
    def fingerprint(self) -> str:
        """A stable digest of all that makes this the same resource (docs/config.md#identity).

        The credential's *values* are deliberately absent: rotating one invalidates nothing.
        Computed once per resource (the model is frozen): every prepare asks for it.
        """
        parts = urlsplit(self.url)
        credential = self.credential
        token = credential if isinstance(credential, TokenAuth) else None
        identity = {
            "url": self.url,
            "kind": self.kind,
            # A bearer or basic token keeps the two keys it always had, in either form.
            "token_env": token.token_env if token else None,
            "token_scheme": token.scheme if token else self.token_scheme,
            "scheme": parts.scheme.lower(),
            "host": (parts.hostname or "").lower(),
            "port": _effective_port(self.url),
            "allow_private_host": self.allow_private_host,
            "allow_loopback_http": self.allow_loopback_http,
            **self.settings.fingerprint_part(),
        }
        if credential is not None and token is None:
            # The scheme and the variables' names, never a value: a changed one means
            # the gateway speaks as someone else.
            identity["auth"] = credential.model_dump(mode="json")
        if self.headers:
            # Static headers can change what a write does (a blob type, an API version).
            identity["headers"] = [[name, value] for name, value in self.headers]
        text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
        return sha256_label(text)


# What ``config`` passes as validation context: why a kind name cannot be used (not
# installed, or its distribution failed to load), or None when it can.
KindProblem = Callable[[str], "str | None"]
# The keys of a resource that every kind shares; every other key is its kind's.
COMMON_KEYS = frozenset(name for name in Resource.model_fields if name != "settings")


def _effective_port(url: str) -> int | None:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        return None
    if port is not None:
        return port
    return {"https": 443, "http": 80}.get(parts.scheme.lower())


__all__ = [
    "COMMON_KEYS",
    "ID_PATTERN",
    "KINDS_CONTEXT",
    "MAX_LISTING_BYTES",
    "Auth",
    "AwsSigV4Auth",
    "AzureSharedKeyAuth",
    "HeaderAuth",
    "KindProblem",
    "KindSettings",
    "Limits",
    "Resource",
    "StrictModel",
    "TokenAuth",
]
