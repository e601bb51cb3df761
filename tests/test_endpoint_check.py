"""The endpoint check (SPEC §11) against the real contract server and a real ledger."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from undogate.config import Config, parse_config
from undogate.contract_server import ContractServer
from undogate.endpoint_check import MARKER_PREFIX, CheckResult, check_endpoint, latest_verification
from undogate.engine import Gateway
from undogate.errors import InvalidRequest
from undogate.ledger import Ledger
from undogate.net import RemoteHTTP, RemoteResponse

from .conftest import cli, make_config, resource

PROD = "/records/customer-123"
COPY = "/records/copy-1"
PROD_TEXT = "/docs/notes.md"
COPY_TEXT = "/docs/copy.md"


class ScriptedHTTP(RemoteHTTP):
    """The real client, recording each write's body; after numbered write (1, 2, ...) a
    test may run a callback, e.g. arm a fault in the real server at that moment."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.writes = 0
        self.after: dict[int, Callable[[], object]] = {}
        self.bodies: list[bytes] = []

    def send(
        self, method: str, url: str, *, headers: dict[str, str], **kwargs: Any
    ) -> RemoteResponse:
        if method not in ("PUT", "PATCH"):
            return super().send(method, url, headers=headers, **kwargs)
        self.writes += 1
        self.bodies.append(kwargs.get("content") or b"")
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
    ("stale_write_refused", True),
    ("good_write", True),
    ("undo_restores", True),
    ("production_unchanged", True),
]


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

    result = check_endpoint(config, ledger, http, "customer-copy", {})

    assert result.passed and outcomes(result) == ALL_PASSED
    assert server.get_record(COPY) == start
    assert server.raw_bytes(PROD) == prod_bytes and server.etag(PROD) == prod_etag
    assert server.attempt_count(PROD) == 0
    assert server.attempt_count(COPY) == 3 and server.write_count(COPY) == 2
    marker = next(b for b in http.bodies if MARKER_PREFIX.encode() in b)
    assert b'"path":"/status"' in marker  # the first allow-listed field carried it
    [(rid, copy_id, passed, evidence)] = evidence_rows(ledger)
    assert (rid, copy_id, passed) == ("customer", "customer-copy", 1)
    assert MARKER_PREFIX not in evidence and "undogate-stale" not in evidence
    assert "lead" not in evidence and "Ada" not in evidence
    assert latest_verification(ledger, prod)
    with ledger.raw() as c:
        ops = [r[0] for r in c.execute("SELECT operation FROM events WHERE target = 'customer'")]
    assert ops == ["endpoint_check_started", "endpoint_check"]


def test_a_webdav_text_test_copy_passes_and_its_bytes_come_back_exactly(
    server: ContractServer, data_dir: Path, ledger: Ledger, http: ScriptedHTTP
) -> None:
    body = "# Copy\r\nno final newline ✓".encode()
    config = text_config(server, data_dir, body)
    prod_bytes, prod_etag = server.raw_bytes(PROD_TEXT), server.etag(PROD_TEXT)

    result = check_endpoint(config, ledger, http, "notes-copy", {})

    assert result.passed and outcomes(result) == ALL_PASSED
    assert server.raw_bytes(COPY_TEXT) == body
    assert server.media_type(COPY_TEXT) == "text/markdown"
    assert server.raw_bytes(PROD_TEXT) == prod_bytes and server.etag(PROD_TEXT) == prod_etag
    [(_, _, passed, evidence)] = evidence_rows(ledger)
    assert passed == 1 and MARKER_PREFIX not in evidence and "Copy" not in evidence


def test_it_never_runs_against_a_resource_that_is_not_a_test_copy(
    server: ContractServer, data_dir: Path, ledger: Ledger, http: ScriptedHTTP
) -> None:
    config = record_config(server, data_dir)
    with pytest.raises(InvalidRequest, match="not declared a test copy"):
        check_endpoint(config, ledger, http, "customer", {})
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
        check_endpoint(config, ledger, http, "alias", {})
    assert server.attempt_count(PROD) == 0 and http.writes == 0


def test_a_server_that_ignores_a_stale_if_match_fails_and_the_copy_is_put_back(
    server: ContractServer, data_dir: Path, ledger: Ledger, http: ScriptedHTTP
) -> None:
    config = record_config(server, data_dir)
    start = server.get_record(COPY)
    prod = config.resource("customer")
    assert prod is not None
    assert check_endpoint(config, ledger, http, "customer-copy", {}).passed
    # A server that does not enforce If-Match: the stale write lands.
    server.arm("ignore_if_match", COPY)

    result = check_endpoint(config, ledger, http, "customer-copy", {})

    assert not result.passed
    assert outcomes(result) == [
        ("production_read", True),
        ("strong_etag", True),
        ("stale_write_refused", False),
        ("restore_test_copy", True),
        ("production_unchanged", True),
    ]
    assert result.steps[2].evidence == {"status": 200, "unchanged": False}
    assert server.get_record(COPY) == start
    assert not latest_verification(ledger, prod)  # the latest check counts, not the best


def test_a_stale_write_refused_with_409_is_not_enough(
    server: ContractServer, data_dir: Path, ledger: Ledger, http: ScriptedHTTP
) -> None:
    """409 also means "nothing changed" (SPEC §4), but it does not show that the server
    compares If-Match: the stale write's JSON Patch `test` operations hold, so a 409 came
    from something else. §11 asks for 412, so anything else fails the step."""
    config = record_config(server, data_dir)
    server.arm("precondition_status:409", COPY)

    result = check_endpoint(config, ledger, http, "customer-copy", {})

    assert not result.passed
    assert result.steps[2].name == "stale_write_refused" and not result.steps[2].passed
    assert result.steps[2].evidence == {"status": 409, "unchanged": True}
    assert [s.name for s in result.steps[3:]] == ["restore_test_copy", "production_unchanged"]
    assert result.steps[3].evidence == {"needed": False}


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
        http.after[2] = lambda: server.arm("weak_etag", COPY)
    else:
        server.arm(fault, COPY)

    result = check_endpoint(config, ledger, http, "customer-copy", {})

    assert not result.passed
    good = result.steps[3]
    assert (good.name, good.passed) == ("good_write", False)
    restore = result.steps[4]
    assert restore.name == "restore_test_copy" and restore.passed
    assert restore.evidence["needed"] is restored_by_hand
    assert result.steps[5] == result.steps[-1] and result.steps[5].passed
    assert server.get_record(COPY) == start
    [(_, _, passed, _)] = evidence_rows(ledger)
    assert passed == 0


def test_evidence_is_append_only(
    server: ContractServer, data_dir: Path, ledger: Ledger, http: ScriptedHTTP
) -> None:
    check_endpoint(record_config(server, data_dir), ledger, http, "customer-copy", {})
    with ledger.raw() as c:
        for sql in ("UPDATE endpoint_checks SET passed = 0", "DELETE FROM endpoint_checks"):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                c.execute(sql)


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
    assert "[pass] a stale If-Match write is refused with 412" in ok.stdout
    assert "customer: verified on a test copy" in ok.stdout
    server.arm("status:500", COPY)
    failed = cli("check-endpoint", "customer-copy", "--config", str(path))
    assert failed.returncode == 1, failed.stderr
    assert "[FAIL] a good conditional write" in failed.stdout
    refused = cli("check-endpoint", "customer", "--config", str(path))
    assert refused.returncode == 2
    assert "not declared a test copy" in refused.stderr and "Traceback" not in refused.stderr
    assert server.attempt_count(PROD) == 0


def test_the_job_page_says_attested_only_until_a_check_passes(
    server: ContractServer, data_dir: Path, open_gateway: Callable[[Config], Gateway]
) -> None:
    from .browser import web_config, web_world
    from .test_web import new_job, signed_in

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
        assert check_endpoint(with_copy, gw.ledger, gw.http, "customer-copy", {}).passed
        after = client.get(f"/jobs/{job_id}").text
        assert "verified on a test copy" in after and "attested only" not in after


def test_agents_never_see_or_prepare_on_a_test_copy(
    server: ContractServer, data_dir: Path, open_gateway: Callable[..., Gateway]
) -> None:
    from undogate.engine import PrepareRequest
    from undogate.errors import NotFound
    from undogate.jobs import ChangeRequest

    from .conftest import AGENT

    gw = open_gateway(record_config(server, data_dir))
    assert [r.id for r in gw.list_resources("account-assistant")] == ["customer"]
    req = PrepareRequest("x", (ChangeRequest(resource_id="customer-copy", set={"status": "y"}),))
    with pytest.raises(NotFound):
        gw.prepare(AGENT, "account-assistant", req)
