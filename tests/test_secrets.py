"""Tokens: read at each dispatch, sent only as the configured scheme, never seen anywhere else."""

from __future__ import annotations

import base64
import json
import logging
import secrets
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from undogate.contract_server import ContractServer
from undogate.engine import Gateway
from undogate.errors import MissingToken, UndogateError
from undogate.jobs import ChangeRequest, JobState, Operation, PrepareRequest
from undogate.redact import (
    REDACTED,
    RedactSecrets,
    install_redaction,
    secret_forms,
    uninstall_redaction,
)
from undogate.views import agent_receipt, job_receipt

from .conftest import AGENT, OWNER, make_config, resource

VAR = "CUSTOMER_SERVICE_TOKEN"
PATH = "/records/customer-123"


def new_token(scheme: str) -> str:
    if scheme == "basic":
        return f"svc-user:{secrets.token_hex(16)}"
    return f"tok-{secrets.token_hex(20)}"


@pytest.fixture
def token_server() -> Iterator[ContractServer]:
    with ContractServer(None, token="unset") as srv:
        yield srv


def prepare(gw: Gateway, **set_: object) -> str:
    request = PrepareRequest(
        summary="Promote the lead",
        changes=(ChangeRequest(resource_id="customer", set=dict(set_)),),
    )
    return gw.prepare(AGENT, "account-assistant", request).job.id


class Evidence:
    """Everything a run produced that a person, an agent or a file could show."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def add(self, *items: Any) -> None:
        for item in items:
            self.texts.append(item if isinstance(item, str) else repr(item))

    def add_error(self, exc: BaseException) -> None:
        self.add(str(exc), repr(exc), "".join(traceback.format_exception(exc)))
        if isinstance(exc, UndogateError):
            self.add(json.dumps(exc.to_dict(), default=str))

    def expect_error(self, call: Callable[[], Any]) -> UndogateError:
        with pytest.raises(UndogateError) as info:
            call()
        self.add_error(info.value)
        return info.value


@pytest.mark.parametrize("scheme", ["bearer", "basic"])
def test_a_full_apply_and_undo_leaks_the_token_nowhere(
    scheme: str,
    token_server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[..., Gateway],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    token = new_token(scheme)
    token_server.token = token  # the server refuses any request without this exact token
    res = resource(token_server, "customer", PATH, token_env=VAR, token_scheme=scheme)
    environ = {VAR: token}
    gw = open_gateway(make_config(token_server, data_dir, res), environ=environ)
    seen = Evidence()

    job_id = prepare(gw, status="customer", owner="ada")
    preview = gw.preview(OWNER, job_id, Operation.APPLY)
    assert preview.token
    dry = gw.confirm(OWNER, job_id, preview.token, dry_run=True)
    seen.add(dry, json.dumps(list(dry.requests), default=str))
    applied = gw.confirm(OWNER, job_id, preview.token).job
    assert applied.state is JobState.APPLIED  # so the token did reach the server
    seen.expect_error(lambda: gw.confirm(OWNER, job_id, "not-a-preview-token"))
    seen.expect_error(lambda: gw.reject(OWNER, job_id))
    seen.expect_error(lambda: gw.preview(OWNER, "job_missing", Operation.APPLY))

    # a refused read that carried a (now wrong) token: the error must not echo it
    token_server.token = new_token(scheme)
    seen.expect_error(lambda: gw.preview(OWNER, job_id, Operation.UNDO))
    token_server.token = token

    undo = gw.preview(OWNER, job_id, Operation.UNDO)
    assert undo.token
    undone = gw.confirm(OWNER, job_id, undo.token).job
    assert undone.state is JobState.UNDONE

    final = gw.get_job(OWNER.owner_id, job_id)
    seen.add(preview, undo, applied, undone, final)
    for job in (applied, undone, final):
        seen.add(json.dumps(job_receipt(job), default=str), json.dumps(agent_receipt(job)))
    seen.add(*gw.events(OWNER.owner_id, job_id))
    for record in caplog.records:
        seen.add(record.getMessage(), repr(record.__dict__))
        if record.exc_info:
            seen.add(logging.Formatter().formatException(record.exc_info))
    assert caplog.records, "the run should have logged something to search"
    files = {p: p.read_bytes() for p in sorted(data_dir.rglob("*")) if p.is_file()}
    assert any(p.name.startswith("ledger") for p in files)

    for form in secret_forms(token):
        for text in seen.texts:
            assert form not in text
        for path, data in files.items():
            assert form.encode() not in data, path


def test_a_missing_variable_refuses_with_its_name_never_a_value(
    token_server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[..., Gateway],
) -> None:
    token = new_token("bearer")
    token_server.token = token
    res = resource(token_server, "customer", PATH, token_env=VAR)
    environ: dict[str, str] = {}
    gw = open_gateway(make_config(token_server, data_dir, res), environ=environ)

    with pytest.raises(MissingToken) as info:
        prepare(gw, status="customer")
    assert VAR in info.value.message
    assert info.value.details["variable"] == VAR

    environ[VAR] = token
    job_id = prepare(gw, status="customer")
    preview = gw.preview(OWNER, job_id, Operation.APPLY)
    assert preview.token
    del environ[VAR]
    with pytest.raises(MissingToken) as info:
        gw.confirm(OWNER, job_id, preview.token)
    assert VAR in info.value.message
    assert token not in str(info.value.to_dict())
    assert token_server.write_count(PATH) == 0
    assert gw.get_job(OWNER.owner_id, job_id).state is JobState.PREPARED


def test_a_rotated_token_is_used_at_the_next_dispatch_without_a_restart(
    token_server: ContractServer,
    data_dir: Path,
    open_gateway: Callable[..., Gateway],
) -> None:
    first, second = new_token("bearer"), new_token("bearer")
    token_server.token = first
    res = resource(token_server, "customer", PATH, token_env=VAR)
    environ = {VAR: first}
    gw = open_gateway(make_config(token_server, data_dir, res), environ=environ)
    job_id = prepare(gw, status="customer")
    preview = gw.preview(OWNER, job_id, Operation.APPLY)
    assert preview.token
    assert gw.confirm(OWNER, job_id, preview.token).job.state is JobState.APPLIED

    token_server.token = environ[VAR] = second
    undo = gw.preview(OWNER, job_id, Operation.UNDO)
    assert undo.token
    assert gw.confirm(OWNER, job_id, undo.token).job.state is JobState.UNDONE


# -- the logging filter ------------------------------------------------------------------


def make_record(msg: str, *args: Any, exc_info: Any = None) -> logging.LogRecord:
    return logging.LogRecord("undogate.test", logging.WARNING, __file__, 1, msg, args, exc_info)


def test_secret_forms_cover_the_value_basic_auth_and_the_password() -> None:
    forms = secret_forms("svc-user:hunter2-very-secret")
    assert "svc-user:hunter2-very-secret" in forms
    assert base64.b64encode(b"svc-user:hunter2-very-secret").decode() in forms
    assert "hunter2-very-secret" in forms
    assert secret_forms("") == []


def test_the_filter_scrubs_message_args_and_tracebacks() -> None:
    token = new_token("basic")
    encoded = base64.b64encode(token.encode()).decode()
    redaction = RedactSecrets([VAR, "UNSET_VARIABLE"], environ={VAR: token})

    record = make_record("sent Authorization: Basic %s for %s", encoded, "customer")
    assert redaction.filter(record)
    assert record.getMessage() == f"sent Authorization: Basic {REDACTED} for customer"

    try:
        raise RuntimeError(f"boom {token}")
    except RuntimeError as exc:
        record = make_record("failed", exc_info=(type(exc), exc, exc.__traceback__))
    redaction.filter(record)
    assert record.exc_text is not None
    assert token not in record.exc_text
    assert REDACTED in record.exc_text


def test_the_filter_leaves_clean_records_alone() -> None:
    redaction = RedactSecrets([VAR], environ={VAR: new_token("bearer")})
    record = make_record("read %s in %d ms", "customer", 12)
    redaction.filter(record)
    assert record.args == ("customer", 12)
    assert record.getMessage() == "read customer in 12 ms"


def test_install_redaction_covers_every_logger_and_follows_rotation(
    caplog: pytest.LogCaptureFixture,
) -> None:
    first, second = new_token("bearer"), new_token("bearer")
    environ = {VAR: first}
    redaction = install_redaction([VAR], environ=environ)
    try:
        caplog.set_level(logging.INFO)
        logging.getLogger("some.library").info("token is %s", first)
        environ[VAR] = second
        logging.getLogger("undogate.engine").info(f"rotated to {second}")
    finally:
        uninstall_redaction(redaction)
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [f"token is {REDACTED}", f"rotated to {REDACTED}"]
    caplog.clear()
    logging.getLogger("some.library").info("after %s", "uninstall")
    assert caplog.records[0].getMessage() == "after uninstall"
    assert logging.getLogRecordFactory() is logging.LogRecord
