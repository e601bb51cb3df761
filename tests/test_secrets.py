"""Credentials: read at each dispatch, sent only as the configured scheme, never seen
anywhere else, for every scheme (bearer, basic, a named header, AWS SigV4 on moto's S3,
Azure Shared Key on Azurite)."""

from __future__ import annotations

import base64
import contextlib
import html
import json
import logging
import re
import secrets
import subprocess
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from rich.console import Console
from starlette.testclient import TestClient

from undogate.auth import Keyring
from undogate.cli.redact import (
    REDACTED,
    RedactSecrets,
    install_redaction,
    secret_forms,
    uninstall_redaction,
)
from undogate.cli.review import _render_requests
from undogate.config import parse_config
from undogate.contract_server import ContractServer
from undogate.errors import MissingToken, UndogateError
from undogate.jobs import JobState, Operation
from undogate.service import Service
from undogate.testing import FaultProxy
from undogate.testing.launcher import popen
from undogate.views import agent_receipt, job_receipt

from .object_stores import AZURE_KEY_ENV, S3_SECRET_ENV, BlobServer, S3Server
from .processes import stop
from .serving import SERVE, base_env, cli, free_port, wait_healthy
from .test_web import csrf_of, sign_in
from .worlds import (
    MASTER_KEY,
    OWNER,
    LocalGateway,
    make_config,
    prepare,
    prepare_via_api,
    resource,
    review_app,
)

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
    open_gateway: Callable[..., LocalGateway],
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
    seen.add(*gw.ledger.events(job_id))
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
    open_gateway: Callable[..., LocalGateway],
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
    open_gateway: Callable[..., LocalGateway],
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


# -- every scheme, through every surface ------------------------------------------------
# A real endpoint that refuses anything but the right credential, behind a proxy that
# records what reached it; the gateway's API, review pages and CLI rendering, its logs
# at DEBUG and its ledger files: no credential value, in any spelling, and no credential
# that went on the wire (a token, a signature), anywhere.

# The signature inside an Authorization value: SigV4's, or Shared Key's.
WIRE_SIGNATURE = re.compile(r"Signature=([0-9a-f]+)|SharedKey [^:]+:(\S+)")
TARGET = "target"


@dataclass
class SchemeWorld:
    resource: dict[str, Any]  # the gateway's resource ``target``, reached through ``proxy``
    environ: dict[str, str]
    variable: str  # the variable the test breaks and unsets
    wrong: str  # a value of it the endpoint refuses
    change: dict[str, Any]
    state: Callable[[], bytes]
    summary: str  # how the preview says requests are authenticated
    proxy: FaultProxy


def _contract_world(scheme: str, stack: contextlib.ExitStack) -> SchemeWorld:
    token = new_token(scheme)
    header = "X-Api-Key" if scheme == "header" else None
    server = stack.enter_context(ContractServer(None, token=token, token_header=header))
    server.set_record(PATH, {"status": "lead", "owner": "sam"})
    proxy = stack.enter_context(_proxied(server.url("")))
    auth: dict[str, Any] = {"scheme": scheme, "token_env": VAR}
    if header:
        auth["name"] = header
    summaries = {
        "bearer": "a bearer token from the gateway's environment",
        "basic": "HTTP Basic credentials from the gateway's environment",
        "header": "a token from the gateway's environment in X-Api-Key",
    }
    return SchemeWorld(
        resource={
            **resource(server, TARGET, PATH, fields=["status", "owner"], auth=auth),
            "url": proxy.url(server.url(PATH)),
        },
        environ={VAR: token},
        variable=VAR,
        wrong=new_token(scheme),
        change={"set": {"status": "customer"}},
        state=lambda: server.raw_bytes(PATH),
        summary=summaries[scheme],
        proxy=proxy,
    )


def _store_world(store: S3Server | BlobServer, stack: contextlib.ExitStack) -> SchemeWorld:
    name = f"secrets/{secrets.token_hex(5)}.md"
    store.put(name, b"# Notes\n\nCall Ann.\n", "text/markdown")
    proxy = stack.enter_context(_proxied(store.url(name)))  # its origin
    entry: dict[str, Any] = {
        "id": TARGET,
        "agent_id": "account-assistant",
        "name": "Notes",
        "kind": "webdav_text",
        "url": proxy.url(store.url(name)),
        "conditional_writes": True,
        "allow_loopback_http": True,
        "auth": store.auth,
    }
    if isinstance(store, S3Server):
        variable, wrong = S3_SECRET_ENV, "wrong-" + secrets.token_hex(18)
        summary = "signed with AWS SigV4 (us-east-1, s3) at send time"
    else:
        entry["headers"] = {"x-ms-blob-type": "BlockBlob"}
        variable, wrong = AZURE_KEY_ENV, base64.b64encode(secrets.token_bytes(32)).decode()
        summary = f"signed with Azure Shared Key (account {store.account}) at send time"
    return SchemeWorld(
        resource=entry,
        environ=dict(store.environ),
        variable=variable,
        wrong=wrong,
        change={"text": "# Notes\n\nAnn called back.\n"},
        state=lambda: store.get(name).content,
        summary=summary,
        proxy=proxy,
    )


@contextlib.contextmanager
def _proxied(origin: str) -> Iterator[FaultProxy]:
    proxy = FaultProxy(origin).start()
    try:
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture(params=["bearer", "basic", "header", "aws_sigv4", "azure_shared_key"])
def scheme_world(request: pytest.FixtureRequest) -> Iterator[SchemeWorld]:
    with contextlib.ExitStack() as stack:
        if request.param == "aws_sigv4":
            yield _store_world(request.getfixturevalue("moto_s3"), stack)
        elif request.param == "azure_shared_key":
            yield _store_world(request.getfixturevalue("azurite"), stack)
        else:
            yield _contract_world(request.param, stack)


def test_every_scheme_leaks_its_credential_nowhere(
    scheme_world: SchemeWorld,
    data_dir: Path,
    open_gateway: Callable[..., LocalGateway],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    world, seen = scheme_world, Evidence()
    environ = dict(world.environ)
    config = parse_config(
        {
            "server": {"data_dir": str(data_dir)},
            "resources": [world.resource],
            "agents": [{"id": "account-assistant", "tools": ["list_resources", "prepare_changes"]}],
        }
    )
    gw = open_gateway(config, environ=environ)
    keyring = Keyring(gw.ledger, known_agents=lambda: {"account-assistant"})
    operator = keyring.create_operator(label="alice")
    agent = keyring.create_agent_token(
        owner_id=operator.credential.id, agent_id="account-assistant", label="assistant"
    )
    as_operator = {"Authorization": f"Bearer {operator.key}"}
    as_agent = {"Authorization": f"Bearer {agent.key}"}
    start = world.state()
    body = {"summary": "Update it", "changes": [{"resource": TARGET, **world.change}]}

    def operate(client: TestClient, job_id: str, operation: str) -> Any:
        shown = client.post(
            f"/api/v1/jobs/{job_id}/previews", json={"operation": operation}, headers=as_operator
        )
        assert shown.status_code == 200, shown.text
        token = shown.json()["preview_token"]
        dry = client.post(
            f"/api/v1/jobs/{job_id}/confirm",
            json={"preview_token": token, "dry_run": True},
            headers=as_operator,
        )
        done = client.post(
            f"/api/v1/jobs/{job_id}/confirm", json={"preview_token": token}, headers=as_operator
        )
        assert done.status_code == 200, done.text
        seen.add(shown.text, dry.text, done.text)
        return dry.json(), done.json()

    app = review_app(Service(gw, keyring))
    with TestClient(app) as client:
        job_id = prepare_via_api(client, agent.key, body)
        assert sign_in(client, operator.key).status_code == 200
        csrf = csrf_of(client.get(f"/jobs/{job_id}").text)
        page = client.post(f"/jobs/{job_id}/previews", data={"csrf": csrf, "operation": "apply"})
        assert page.status_code == 200, page.text
        seen.add(page.text)
        assert world.summary in html.unescape(page.text)  # how it is signed, never with what

        dry, done = operate(client, job_id, "apply")
        assert done["job"]["state"] == "applied"  # so the credential did reach the endpoint
        assert world.state() != start
        (request,) = dry["requests"]
        assert request["authentication"]["summary"].startswith(world.summary)
        console = Console(record=True, width=200)
        _render_requests(console, dry["requests"])
        seen.add(console.export_text())
        assert operate(client, job_id, "undo")[1]["job"]["state"] == "undone"
        assert world.state() == start

        for page_path, headers in (
            (f"/api/v1/jobs/{job_id}", as_operator),
            (f"/api/v1/jobs/{job_id}/events", as_operator),
            ("/api/v1/resources", as_agent),
            (f"/jobs/{job_id}", {}),
        ):
            shown = client.get(page_path, headers=headers)
            assert shown.status_code == 200, (page_path, shown.text)
            seen.add(shown.text)
        seen.add(json.dumps(agent_receipt(gw.get_job(operator.credential.id, job_id))))

        # The endpoint refuses a wrong value: the refusals name no credential.
        second = prepare_via_api(client, agent.key, body)
        preview = f"/api/v1/jobs/{second}/previews"
        environ[world.variable] = world.wrong
        for refused in (
            client.post("/api/v1/jobs", json=body, headers=as_agent),
            client.post(preview, json={"operation": "apply"}, headers=as_operator),
        ):
            assert refused.status_code >= 400
            assert refused.json()["error"]["code"] == "remote_unavailable", refused.text
            seen.add(refused.text)
        # A missing variable: the operator is told its name, the agent not even that.
        del environ[world.variable]
        for missing in (
            client.post("/api/v1/jobs", json=body, headers=as_agent),
            client.post(preview, json={"operation": "apply"}, headers=as_operator),
        ):
            assert missing.json()["error"]["code"] == "missing_token", missing.text
            seen.add(missing.text)
        assert world.variable in missing.json()["error"]["message"]
    assert world.state() == start

    for record in caplog.records:
        seen.add(record.getMessage(), repr(record.__dict__))
        if record.exc_info:
            seen.add(logging.Formatter().formatException(record.exc_info))
    files = {p: p.read_bytes() for p in sorted(data_dir.rglob("*")) if p.is_file()}
    on_the_wire = {
        part
        for sent in world.proxy.seen
        for name, value in sent.headers.items()
        if name.lower() in {"authorization", "x-api-key", "x-amz-security-token"}
        for part in (value, *(p for m in WIRE_SIGNATURE.findall(value) for p in m if p))
    }
    assert on_the_wire, "the credential should have been seen on the wire"
    forbidden = {
        form for value in (*world.environ.values(), world.wrong) for form in secret_forms(value)
    }
    for form in forbidden | on_the_wire:
        for text in seen.texts:
            assert form not in text
        for path, data in files.items():
            assert form.encode() not in data, path


def test_json_logs_parse_line_by_line_and_carry_no_token_or_key(
    token_server: ContractServer, tmp_path: Path
) -> None:
    """``serve --log-format json``: every line of stderr is one JSON object, what serve
    says and what it logs alike; no token value, nor any key, anywhere in it."""
    token = new_token("basic")
    token_server.token = token
    config = tmp_path / "undogate.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "server": {"data_dir": str(tmp_path / "data")},
                "resources": [resource(token_server, "customer", PATH, token_env=VAR,
                                       token_scheme="basic")],
                "agents": [{"id": "account-assistant", "tools": ["prepare_changes"]}],
            }
        )
    )  # fmt: skip
    env = {**base_env(), VAR: token, "UNDOGATE_MASTER_KEY": MASTER_KEY}
    operator = cli("init", "--config", str(config), env=env).stdout.strip()
    made = cli("keys", "create-agent", "--agent", "account-assistant", "--config", str(config),
               env=env)  # fmt: skip
    agent = made.stdout.splitlines()[0]
    port = free_port()
    proc = popen(
        [*SERVE, "--config", str(config), "--port", str(port), "--log-format", "json"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        with httpx.Client(base_url=url, timeout=30) as client:
            prepared = client.post(
                "/api/v1/jobs",
                json={"summary": "s", "changes": [{"resource": "customer",
                                                   "set": {"status": "customer"}}]},
                headers={"Authorization": f"Bearer {agent}"},
            )  # fmt: skip
            assert prepared.status_code == 201, prepared.text  # the token reached the server
            # Refusals are logged: one with the agent's key, one where the remote refused
            # the (now wrong) token the gateway sent.
            assert client.get("/api/v1/jobs", headers={"Authorization": f"Bearer {agent}"}
                              ).status_code == 403  # fmt: skip
            token_server.token = new_token("basic")
            refused = client.post(
                f"/api/v1/jobs/{prepared.json()['job_id']}/previews",
                json={"operation": "apply"},
                headers={"Authorization": f"Bearer {operator}"},
            )
            assert refused.status_code >= 400
    finally:
        stop(proc)
    assert proc.stderr is not None
    logged = proc.stderr.read()
    proc.stderr.close()
    lines = [json.loads(line) for line in logged.splitlines()]  # every line is JSON
    assert all(set(line) >= {"time", "level", "logger", "pid", "message"} for line in lines)
    said = [line["message"] for line in lines if line["logger"] == "undogate.serve"]
    assert any(m.startswith(f"undogate serving {url}") for m in said), said
    warned = [line for line in lines if line["logger"] == "undogate.refusals"]
    assert len(warned) >= 2 and all(line["level"] == "warning" for line in warned), lines
    for secret in [*secret_forms(token), agent, operator, MASTER_KEY]:
        assert secret not in logged
