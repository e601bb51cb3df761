"""The endpoint check (docs/remote-contract.md) on the real contract server and a real ledger."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from undogate.config import Config, parse_config
from undogate.contract_server import ContractServer
from undogate.errors import Conflict, InvalidRequest
from undogate.ledger import Ledger
from undogate.net import PinnedClient, RemoteResponse
from undogate.operations.context import Context
from undogate.operations.endpoint_check import (
    MARKER_PREFIX,
    CheckResult,
    Step,
    check_endpoint,
    latest_verification,
    report_lines,
    result_view,
)

from .serving import SERVED_COPY_PATH, SERVED_PATH, cli
from .worlds import LocalGateway, make_config, resource

PROD = "/records/customer-123"
COPY = "/records/copy-1"
PROD_TEXT = "/docs/notes.md"
COPY_TEXT = "/docs/copy.md"


class ScriptedHTTP(PinnedClient):
    """The real client, recording each write's body; after numbered write (1, 2, ...) a
    test may run a callback, e.g. arm a fault in the real server at that moment."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.writes = 0
        self.after: dict[int, Callable[[], object]] = {}
        self.bodies: list[bytes] = []
        self.sent: list[tuple[str, str, str]] = []  # method, URL, If-Match of each write

    def send(
        self, method: str, url: str, *, headers: dict[str, str], **kwargs: Any
    ) -> RemoteResponse:
        if method not in ("PUT", "PATCH"):
            return super().send(method, url, headers=headers, **kwargs)
        self.writes += 1
        self.bodies.append(kwargs.get("content") or b"")
        self.sent.append((method, url, headers.get("If-Match", "")))
        response = super().send(method, url, headers=headers, **kwargs)
        if self.writes in self.after:
            self.after[self.writes]()
        return response


@pytest.fixture
def http() -> Iterator[ScriptedHTTP]:
    client = ScriptedHTTP()
    yield client
    client.close()


@pytest.fixture
def ledger(data_dir: Path) -> Iterator[Ledger]:
    opened = Ledger.open(data_dir)
    yield opened
    opened.close()


def record_config(server: ContractServer, data_dir: Path) -> Config:
    server.set_record(COPY, server.get_record(PROD))
    return make_config(
        server,
        data_dir,
        resource(server, "customer", PROD),
        resource(server, "customer-copy", COPY, test_copy_of="customer"),
    )


def text_config(server: ContractServer, data_dir: Path, body: bytes) -> Config:
    server.set_text(COPY_TEXT, body, "text/markdown")
    return make_config(
        server,
        data_dir,
        resource(server, "notes", PROD_TEXT, kind="webdav_text"),
        resource(server, "notes-copy", COPY_TEXT, kind="webdav_text", test_copy_of="notes"),
    )


def copy_of_kind(
    server: ContractServer, data_dir: Path, kind: str, text: bytes = b"one line\n"
) -> tuple[Config, str, str]:
    """(config, the test copy's id, its path) for a record or a document copy."""
    if kind == "json_record":
        return record_config(server, data_dir), "customer-copy", COPY
    return text_config(server, data_dir, text), "notes-copy", COPY_TEXT


def evidence_rows(ledger: Ledger) -> list[tuple[str, str, int, str]]:
    with ledger.raw() as c:
        return c.execute(
            "SELECT resource_id, test_copy_id, passed, evidence FROM endpoint_checks ORDER BY id"
        ).fetchall()


def outcomes(result: CheckResult) -> list[tuple[str, bool]]:
    return [(s.name, s.passed) for s in result.steps]


ALL_PASSED = [
    ("production_read", True),
    ("strong_etag", True),
    ("good_write", True),
    ("stale_write_refused", True),
    ("weak_if_match_refused", True),
    ("missing_not_created", True),
    ("undo_restores", True),
    ("production_unchanged", True),
]


def with_outcome(name: str, passed: bool) -> list[tuple[str, bool]]:
    return [(n, passed if n == name else p) for n, p in ALL_PASSED]


def step(result: CheckResult, name: str) -> Step:
    return next(s for s in result.steps if s.name == name)


def test_a_json_record_test_copy_passes_and_is_restored(
    server: ContractServer, data_dir: Path, ledger: Ledger, http: ScriptedHTTP
) -> None:
    config = record_config(server, data_dir)
    start, prod_bytes, prod_etag = (
        server.get_record(COPY),
        server.raw_bytes(PROD),
        server.etag(PROD),
    )
    prod = config.resource("customer")
    assert prod is not None and not latest_verification(ledger, prod)

    paths, start_etag = server.paths(), server.etag(COPY)
    issued: list[str] = []
    http.after[1] = lambda: issued.append(server.etag(COPY))  # the tag after the good write

    result = check_endpoint(Context(config, ledger, http, environ={}), "customer-copy")

    assert result.passed and outcomes(result) == ALL_PASSED
    assert server.get_record(COPY) == start
    assert server.raw_bytes(PROD) == prod_bytes and server.etag(PROD) == prod_etag
    assert server.attempt_count(PROD) == 0 and server.paths() == paths
    # good write, stale, weak, undo: two of them changed the copy
    assert server.attempt_count(COPY) == 4 and server.write_count(COPY) == 2
    marker = next(b for b in http.bodies if MARKER_PREFIX.encode() in b)
    assert b'"path":"/status"' in marker  # the first allow-listed field carried it
    (_, _, good), (_, _, stale), (_, _, weak), (_, missing_url, missing), _ = http.sent
    # Only tags the endpoint issued: the stale one is the copy's tag before the good write.
    assert good == stale == start_etag and "undogate-stale" not in str(http.sent)
    assert weak == "W/" + issued[0] and missing == issued[0]
    assert missing_url.startswith(server.url(COPY) + "-undogate-absent-")
    [(rid, copy_id, passed, evidence)] = evidence_rows(ledger)
    assert (rid, copy_id, passed) == ("customer", "customer-copy", 1)
    assert MARKER_PREFIX not in evidence and "undogate-stale" not in evidence
    assert "lead" not in evidence and "Ada" not in evidence
    assert latest_verification(ledger, prod)
    events = ledger.read(lambda tx: tx.events_since(0, 0, 1000))
    ops = [e.operation for e in events if e.target == "customer"]
    assert ops == ["endpoint_check_started", "endpoint_check"]


def test_a_webdav_text_test_copy_passes_and_its_bytes_come_back_exactly(
    server: ContractServer, data_dir: Path, ledger: Ledger, http: ScriptedHTTP
) -> None:
    body = "# Copy\r\nno final newline ✓".encode()
    config = text_config(server, data_dir, body)
    prod_bytes, prod_etag = server.raw_bytes(PROD_TEXT), server.etag(PROD_TEXT)

    result = check_endpoint(Context(config, ledger, http, environ={}), "notes-copy")

    assert result.passed and outcomes(result) == ALL_PASSED
    assert server.raw_bytes(COPY_TEXT) == body
    assert server.media_type(COPY_TEXT) == "text/markdown"
    assert server.raw_bytes(PROD_TEXT) == prod_bytes and server.etag(PROD_TEXT) == prod_etag
    [(_, _, passed, evidence)] = evidence_rows(ledger)
    assert passed == 1 and MARKER_PREFIX not in evidence and "Copy" not in evidence


@pytest.mark.parametrize("kind", ["json_record", "webdav_text"])
def test_a_record_and_a_document_are_reported_in_their_own_words(
    server: ContractServer, data_dir: Path, ledger: Ledger, http: ScriptedHTTP, kind: str
) -> None:
    # Every kind's check reports through one view: a record's or a document's steps
    # must never carry a collection's titles (they once did, through a merged table).
    config, copy_id, _ = copy_of_kind(server, data_dir, kind)

    lines = report_lines(
        result_view(check_endpoint(Context(config, ledger, http, environ={}), copy_id))
    )

    assert lines[1] == "  [pass] read the production resource (never written): read", lines
    assert not [line for line in lines if "collection" in line], lines
    # A record names its mode (one of three dialects); a document has one way to write.
    mode = " as json_patch, version in If-Match, stale 412" if kind == "json_record" else ""
    assert lines[-1].endswith(f": verified on a test copy{mode} (check 1 in the ledger)"), lines


def test_it_never_runs_against_a_resource_that_is_not_a_test_copy(
    server: ContractServer, data_dir: Path, ledger: Ledger, http: ScriptedHTTP
) -> None:
    config = record_config(server, data_dir)
    with pytest.raises(InvalidRequest, match="not declared a test copy"):
        check_endpoint(Context(config, ledger, http, environ={}), "customer")
    assert server.attempt_count(PROD) == 0 and http.writes == 0
    assert evidence_rows(ledger) == []


def test_it_never_runs_against_a_test_copy_that_is_its_production_spelled_again(
    server: ContractServer, data_dir: Path, ledger: Ledger, http: ScriptedHTTP
) -> None:
    # The config refuses this pair; a Config built without it must not write either:
    # ".../records/./customer-123" is sent as the production record itself.
    checked = record_config(server, data_dir)
    production = checked.resource("customer")
    assert production is not None
    alias = production.url.replace("/records/", "/records/./")
    copy = production.model_copy(update={"id": "alias", "url": alias, "test_copy_of": "customer"})
    config = Config(checked.server, checked.limits, (production, copy), checked.agents)
    with pytest.raises(InvalidRequest, match="not declared a test copy"):
        check_endpoint(Context(config, ledger, http, environ={}), "alias")
    assert server.attempt_count(PROD) == 0 and http.writes == 0


def test_a_server_that_ignores_a_stale_if_match_fails_and_the_copy_is_put_back(
    server: ContractServer, data_dir: Path, ledger: Ledger, http: ScriptedHTTP
) -> None:
    config = record_config(server, data_dir)
    start = server.get_record(COPY)
    prod = config.resource("customer")
    assert prod is not None
    assert check_endpoint(Context(config, ledger, http, environ={}), "customer-copy").passed
    # A server that does not enforce If-Match: the stale write lands.
    server.arm("ignore_if_match", COPY)

    result = check_endpoint(Context(config, ledger, http, environ={}), "customer-copy")

    assert not result.passed
    assert outcomes(result) == with_outcome("stale_write_refused", False)
    stale = step(result, "stale_write_refused")
    assert stale.evidence == {"status": 200, "unchanged": False}
    assert "the write landed: the endpoint does not compare If-Match" in stale.summary
    assert server.get_record(COPY) == start  # the undo wrote back over the probe's write
    assert not latest_verification(ledger, prod)  # the latest check counts, not the best


def test_a_stale_write_refused_with_409_is_not_enough(
    server: ContractServer, data_dir: Path, ledger: Ledger, http: ScriptedHTTP
) -> None:
    """409 also means "nothing changed" (docs/remote-contract.md), but does not show that the server
    compares If-Match: the stale write's JSON Patch `test` operations hold, so a 409 came
    from something else. The check asks for 412, so anything else fails the step."""
    config = record_config(server, data_dir)
    server.arm("precondition_status:409", COPY)

    result = check_endpoint(Context(config, ledger, http, environ={}), "customer-copy")

    assert not result.passed
    assert outcomes(result) == with_outcome("stale_write_refused", False)
    assert step(result, "stale_write_refused").evidence == {"status": 409, "unchanged": True}


@pytest.mark.parametrize("kind", ["json_record", "webdav_text"])
def test_a_server_that_matches_a_weak_if_match_fails_the_check(
    server: ContractServer, data_dir: Path, ledger: Ledger, http: ScriptedHTTP, kind: str
) -> None:
    """RFC 9110: If-Match compares strongly, so W/"tag" never matches (WsgiDAV's flaw)."""
    config, copy_id, path = copy_of_kind(server, data_dir, kind)
    start = server.raw_bytes(path)
    server.arm("weak_if_match", path)

    result = check_endpoint(Context(config, ledger, http, environ={}), copy_id)

    assert not result.passed
    assert outcomes(result) == with_outcome("weak_if_match_refused", False)
    weak = step(result, "weak_if_match_refused")
    assert weak.evidence == {"status": 200 if kind == "json_record" else 204, "unchanged": False}
    assert "matches a weak tag (RFC 9110: If-Match compares strongly)" in weak.summary
    assert server.raw_bytes(path) == start


@pytest.mark.parametrize("kind", ["json_record", "webdav_text"])
def test_a_server_that_creates_under_if_match_fails_and_the_probe_is_deleted(
    server: ContractServer, data_dir: Path, ledger: Ledger, http: ScriptedHTTP, kind: str
) -> None:
    config, copy_id, path = copy_of_kind(server, data_dir, kind)
    paths, start = server.paths(), server.raw_bytes(path)
    server.arm("create_under_if_match")

    result = check_endpoint(Context(config, ledger, http, environ={}), copy_id)

    assert not result.passed
    assert outcomes(result) == with_outcome("missing_not_created", False)
    missing = step(result, "missing_not_created")
    assert missing.evidence == {
        "status": 201,
        "absent_after": False,
        "created": True,
        "deleted": True,
    }
    assert "CREATED a resource under If-Match" in missing.summary
    created_url = http.sent[3][1]
    assert missing.message == f"the probe created {created_url}; the check deleted it again"
    assert server.paths() == paths and server.raw_bytes(path) == start
    if kind == "webdav_text":  # a random file name beside the document, same extension
        assert created_url.startswith(server.url("/docs/undogate-absent-"))
        assert created_url.endswith(".md")


def test_a_probe_that_cannot_be_deleted_says_what_to_delete_by_hand(
    server: ContractServer, data_dir: Path, ledger: Ledger, http: ScriptedHTTP
) -> None:
    config = record_config(server, data_dir)
    server.arm("create_under_if_match")
    http.after[4] = lambda: server.arm("status:500")  # the probe's DELETE fails

    result = check_endpoint(Context(config, ledger, http, environ={}), "customer-copy")

    missing = step(result, "missing_not_created")
    assert not missing.passed and missing.evidence["deleted"] is False
    created_url = http.sent[3][1]
    assert missing.message is not None
    assert missing.message.endswith(f"delete {created_url} by hand")
    assert created_url.removeprefix(server.base_url) in server.paths()


@pytest.mark.parametrize("kind", ["json_record", "webdav_text"])
def test_a_copy_that_cannot_be_put_back_says_exactly_what_to_restore_by_hand(
    server: ContractServer, data_dir: Path, ledger: Ledger, http: ScriptedHTTP, kind: str
) -> None:
    """After the good write every write that passes If-Match answers 503: the refusal
    probes still pass (their If-Match fails first), the undo and the restore fail."""
    original = "# Copy\r\nno final newline ✓".encode()
    config, copy_id, path = copy_of_kind(server, data_dir, kind, original)
    http.after[1] = lambda: server.arm("status:503", path, count=10)

    result = check_endpoint(Context(config, ledger, http, environ={}), copy_id)

    assert not result.passed
    assert [(s.name, s.passed) for s in result.steps[-3:]] == [
        ("undo_restores", False),
        ("restore_test_copy", False),
        ("production_unchanged", True),
    ]
    restore = step(result, "restore_test_copy")
    assert restore.evidence == {"needed": True, "restored": False, "status": 503}
    assert restore.message is not None and server.url(path) in restore.message
    if kind == "json_record":
        # The original value, exactly (the start was "lead"), and where it lives.
        assert server.get_record(PROD)["status"] == "lead"
        assert f"at {server.url(path)}, set 'status' to \"lead\"" in restore.message
    else:
        saved = Path(restore.message.rpartition("the exact bytes are saved in ")[2])
        assert saved.read_bytes() == original and saved.parent.parent == data_dir
        assert saved.stat().st_mode & 0o777 == 0o600
        assert f"{len(original)} bytes, text/markdown" in restore.message
    [(_, _, passed, evidence)] = evidence_rows(ledger)
    assert passed == 0 and "lead" not in evidence and "Copy" not in evidence
    assert server.url(path) not in evidence  # the message is shown, never recorded


def test_an_outside_edit_of_another_field_fails_the_undo_and_is_never_overwritten(
    server: ContractServer, data_dir: Path, ledger: Ledger, http: ScriptedHTTP
) -> None:
    """Exactly the start covers every allow-listed field; the check writes back only
    over its own marker, so someone else's edit is left for a person, named exactly."""
    config = record_config(server, data_dir)
    http.after[1] = lambda: server.set_field(COPY, "/owner", "someone-else")

    result = check_endpoint(Context(config, ledger, http, environ={}), "customer-copy")

    assert [(s.name, s.passed) for s in result.steps[-3:]] == [
        ("undo_restores", False),
        ("restore_test_copy", False),
        ("production_unchanged", True),
    ]
    restore = step(result, "restore_test_copy")
    assert restore.summary == "the test copy shows neither its start nor the check's write"
    assert restore.message is not None
    assert f"at {server.url(COPY)}, set 'owner' to \"sam\" (its version" in restore.message
    assert server.get_record(COPY)["owner"] == "someone-else"
    assert server.get_record(COPY)["status"] == "lead"


@pytest.mark.parametrize(
    ("fault", "restored_by_hand"),
    [("ok_without_apply", False), ("status:409", False), ("weak_read_back", True)],
)
def test_a_good_write_that_does_not_show_fails_the_check(
    server: ContractServer,
    data_dir: Path,
    ledger: Ledger,
    http: ScriptedHTTP,
    fault: str,
    restored_by_hand: bool,
) -> None:
    config = record_config(server, data_dir)
    start = server.get_record(COPY)
    if fault == "weak_read_back":
        http.after[1] = lambda: server.arm("weak_etag", COPY)
    else:
        server.arm(fault, COPY)

    result = check_endpoint(Context(config, ledger, http, environ={}), "customer-copy")

    assert not result.passed
    assert outcomes(result) == [
        ("production_read", True),
        ("strong_etag", True),
        ("good_write", False),
        ("restore_test_copy", True),
        ("production_unchanged", True),
    ]
    assert step(result, "restore_test_copy").evidence["needed"] is restored_by_hand
    assert server.get_record(COPY) == start
    [(_, _, passed, _)] = evidence_rows(ledger)
    assert passed == 0


def test_a_second_check_of_the_same_copy_at_once_is_refused(
    server: ContractServer, data_dir: Path, ledger: Ledger, http: ScriptedHTTP
) -> None:
    config = record_config(server, data_dir)
    second: list[BaseException] = []

    def check_again() -> None:
        try:
            check_endpoint(Context(config, ledger, http, environ={}), "customer-copy")
        except Conflict as exc:
            second.append(exc)

    http.after[1] = check_again  # while the first check has its marker on the copy
    assert check_endpoint(Context(config, ledger, http, environ={}), "customer-copy").passed
    assert [e.code for e in second] == ["conflict"]  # type: ignore[attr-defined]


def test_the_cli_exits_0_when_verified_1_when_not_and_2_when_refused(
    server: ContractServer, tmp_path: Path
) -> None:
    server.set_record(COPY, server.get_record(PROD))
    path = tmp_path / "undogate.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "server": {"data_dir": str(tmp_path / "data")},
                "resources": [
                    resource(server, "customer", PROD),
                    resource(server, "customer-copy", COPY, test_copy_of="customer"),
                ],
                "agents": [{"id": "account-assistant", "tools": ["list_resources"]}],
            }
        )
    )
    ok = cli("check-endpoint", "customer-copy", "--config", str(path))
    assert ok.returncode == 0, ok.stderr
    assert "(directly on the ledger)" in ok.stderr
    assert (
        "[pass] a write with a version the endpoint issued earlier (now stale) is refused "
        "as stale, with no effect: HTTP 412, nothing changed" in ok.stdout
    )
    assert '[pass] the weak form of the current tag (W/"...") is refused' in ok.stdout
    assert "[pass] a write conditional on a version, to a resource that does not exist" in ok.stdout
    assert "customer: verified on a test copy" in ok.stdout
    server.arm("status:500", COPY)
    failed = cli("check-endpoint", "customer-copy", "--config", str(path))
    assert failed.returncode == 1, failed.stderr
    assert "[FAIL] a good conditional write" in failed.stdout
    assert "[ -- ] the undo write restores the start exactly: not run" in failed.stdout
    refused = cli("check-endpoint", "customer", "--config", str(path))
    assert refused.returncode == 2
    assert "not declared a test copy" in refused.stderr and "Traceback" not in refused.stderr
    assert server.attempt_count(PROD) == 0


def test_the_check_runs_through_a_serving_gateway(
    served: dict[str, Any], server: ContractServer
) -> None:
    """With `UNDOGATE_URL` and the operator's key the CLI goes through POST
    /api/v1/endpoint-checks; without a key, directly on the ledger the server shares. The
    evidence of both lands in the one ledger."""
    config, env = str(served["config"]), dict(served["env"])
    start = server.get_record(SERVED_COPY_PATH)
    done = cli(
        "check-endpoint", "customer-copy", "--config", config,
        env={**env, "UNDOGATE_KEY": str(served["operator"])},
    )  # fmt: skip

    assert done.returncode == 0, done.stdout + done.stderr
    assert "(through the API)" in done.stderr
    assert (
        "customer: verified on a test copy as json_patch, version in If-Match, stale 412 "
        "(check 1 in the ledger)" in done.stdout
    )
    assert server.get_record(SERVED_COPY_PATH) == start
    assert server.attempt_count(SERVED_PATH) == 0
    with httpx.Client(base_url=str(served["url"]), timeout=30) as client:
        agent = client.post(
            "/api/v1/endpoint-checks",
            json={"resource": "customer-copy"},
            headers={"Authorization": f"Bearer {served['agent']}"},
        )
        assert agent.status_code == 403
        again = client.post(
            "/api/v1/endpoint-checks",
            json={"resource": "customer-copy"},
            headers={"Authorization": f"Bearer {served['operator']}"},
        )
    assert again.status_code == 200 and again.headers["cache-control"] == "no-store"
    view = again.json()
    assert (view["check_id"], view["passed"], view["resource"]) == (2, True, "customer")
    assert [s["name"] for s in view["steps"]] == [n for n, _ in ALL_PASSED]
    direct = cli("check-endpoint", "customer-copy", "--config", config, env=env)
    assert direct.returncode == 0, direct.stdout + direct.stderr
    assert "(directly on the ledger)" in direct.stderr
    assert (
        "customer: verified on a test copy as json_patch, version in If-Match, stale 412 "
        "(check 3 in the ledger)" in direct.stdout
    )


def test_the_job_page_says_attested_only_until_a_check_passes(
    server: ContractServer, data_dir: Path, open_gateway: Callable[[Config], LocalGateway]
) -> None:
    from .test_web import new_job, signed_in
    from .worlds import web_config, web_world

    world = web_world(server, data_dir, open_gateway)
    server.set_record(COPY, server.get_record(PROD))
    base = web_config(server, data_dir)
    with_copy = parse_config(
        {
            "server": {"data_dir": str(data_dir)},
            "resources": [
                *[r.model_dump(mode="json", exclude_none=True) for r in base.resources],
                resource(server, "customer-copy", COPY, test_copy_of="customer"),
            ],
            "agents": [a.model_dump(mode="json") for a in base.agents],
        }
    )
    with signed_in(world) as client:
        job_id = new_job(client, world)
        before = client.get(f"/jobs/{job_id}").text
        assert "attested only" in before and "verified on a test copy" not in before
        gw = world.gateway
        assert check_endpoint(
            Context(with_copy, gw.ledger, gw.http, environ={}), "customer-copy"
        ).passed
        after = client.get(f"/jobs/{job_id}").text
        assert "verified on a test copy" in after and "attested only" not in after


def test_agents_never_see_or_prepare_on_a_test_copy(
    server: ContractServer, data_dir: Path, open_gateway: Callable[..., LocalGateway]
) -> None:
    from undogate.errors import NotFound
    from undogate.jobs import ChangeRequest, PrepareRequest

    from .worlds import AGENT

    gw = open_gateway(record_config(server, data_dir))
    assert [r.id for r in gw.config.resources_for("account-assistant")] == ["customer"]
    req = PrepareRequest("x", (ChangeRequest(resource_id="customer-copy", set={"status": "y"}),))
    with pytest.raises(NotFound):
        gw.prepare(AGENT, "account-assistant", req)
