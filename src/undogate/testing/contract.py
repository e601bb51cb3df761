"""The contract every kind passes, built-in or not (docs/kinds.md): ``KindContract``.

A kind's tests subclass it and give one fixture, ``kind_case``: a ``KindCase`` naming
the kind, an existing resource on a test endpoint the author started (and a disposable
copy of it), two changes, and how to edit it as another client would. Each test then
runs a real ``undogate serve`` (``gateway.ServedGateway``) over the author's endpoint,
through a fault proxy (``proxy.FaultProxy``), and speaks to it over the HTTP API:

- prepare writes nothing; confirm sends exactly the requests the preview showed (static
  headers included), with the credential the gateway added as the preview said, never
  shown; undo puts the endpoint back exactly;
- a stale version: refused at prepare (``stale_version``), and, once the endpoint check
  verified the endpoint, a write whose version went stale on the way is refused by the
  endpoint with nothing written (whatever status the resource declares for a stale
  version: only a check that saw it makes it a refusal);
- a read-back that does not show the write is uncertain: the job needs review and its
  resource is quarantined until a reviewer accepts what is observed;
- a lost response: needs review, then reconciled;
- the crash cells: the gateway killed (SIGKILL) at each documented crash point, started
  again, and the job settled without a write sent twice (docs/recovery.md); for a kind
  that creates, the same for a create, undone once a test copy verified that undo;
- the endpoint check passes on the test copy; members of other kinds are refused.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from ..adapters import adapter_for, change_members
from ..operations.context import CRASH_POINTS
from .gateway import ServedGateway
from .proxy import FaultProxy

TOKEN_ENV = "KIT_ENDPOINT_TOKEN"  # noqa: S105 - the name of a variable
RESOURCE, COPY = "kit", "kit-copy"
# (operation, crash point): every cell with UNDOGATE_THOROUGH=1, else a sample: each
# operation, a write lost before and after it left, and a crash before the read-back.
ALL_CELLS = [
    *(("apply", point) for point in CRASH_POINTS),
    *(("undo", point) for point in CRASH_POINTS),
    ("accept_observed", "after_readback"),
    ("accept_observed", "after_outcome"),
]
SAMPLE = {
    ("apply", "after_intent"),
    ("apply", "after_send"),
    ("apply", "after_readback"),
    ("undo", "after_response"),
    ("accept_observed", "after_readback"),
}
THOROUGH = os.environ.get("UNDOGATE_THOROUGH") == "1"
CELLS = [c for c in ALL_CELLS if THOROUGH or c in SAMPLE]
CREATE_POINTS = [point for operation, point in CELLS if operation == "apply"]


@dataclass(frozen=True)
class KindCase:
    """What the contract needs of a kind and the endpoint its author started."""

    kind: str
    url: str  # an existing resource on the test endpoint (http://127.0.0.1:PORT/...)
    test_copy_url: str  # a disposable copy of it, for the endpoint check
    change: Mapping[str, Any]  # the members of a change to it (without "resource")
    other_change: Mapping[str, Any]  # another change of the same parts, other values
    # Changes those parts as another client would, to values neither change has; each
    # call makes a new version.
    outside_edit: Callable[[], object]
    # The resource's content as the endpoint holds it (its version aside: an undo puts
    # the content back under a new version), compared, never parsed.
    state: Callable[[], bytes]
    settings: Mapping[str, Any] = field(default_factory=dict)  # the kind's own keys
    token: str | None = None  # the bearer token the endpoint requires, if any
    # Or any other credential the endpoint requires: the resource's ``auth`` (a scheme
    # and the names of its variables, docs/config.md) and those variables' values.
    auth: Mapping[str, Any] | None = None
    environ: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)  # static headers, if any
    # The members of a change that creates a part of the resource (a collection's
    # record), for a kind that creates: its crash cells run once the test copy verified
    # the undo of a create and a reviewer accepted it.
    create: Mapping[str, Any] | None = None


@dataclass
class Kit:
    """One run of the contract: the proxy, the served gateway, the case."""

    case: KindCase
    proxy: FaultProxy
    gateway: ServedGateway

    def prepare(self, members: Mapping[str, Any], **extra: Any) -> str:
        response = self.gateway.prepare({"resource": RESOURCE, **members}, **extra)
        assert response.status_code == 201, response.text
        return str(response.json()["job_id"])

    def state_of(self, job_id: str) -> str:
        return str(self.gateway.receipt(job_id)["state"])

    def actions(self, job_id: str) -> list[tuple[str, str]]:
        return [(a["operation"], a["status"]) for a in self.gateway.receipt(job_id)["actions"]]

    def confirmed(self, job_id: str, operation: str) -> dict[str, Any]:
        done = self.gateway.operate(job_id, operation)
        assert done.status_code == 200, done.text
        job: dict[str, Any] = done.json()["job"]
        return job

    def verify(self) -> None:
        """The endpoint check on the test copy, through the API: it must pass."""
        checked = self.gateway.call("POST", "/api/v1/endpoint-checks", {"resource": COPY})
        assert checked.status_code == 200, checked.text
        view = checked.json()
        failed = [s for s in view["steps"] if not s["passed"]]
        assert view["passed"] is True, failed

    def verify_undos(self) -> None:
        """The endpoint check on the test copy, then a reviewer accepts what it verified."""
        self.verify()
        accepted = self.gateway.call("POST", f"/api/v1/resources/{RESOURCE}/undo-acceptance")
        assert accepted.status_code == 200, accepted.text

    def observation(self, job_id: str) -> str | None:
        preview = self.gateway.preview(job_id, "accept_observed")
        assert preview.status_code == 200, preview.text
        seen: str | None = preview.json()["changes"][0]["observation"]
        return seen


def _path(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


class KindContract:
    """Subclass it, give a ``kind_case`` fixture: the contract runs against your kind."""

    def test_prepare_writes_nothing_and_confirm_sends_exactly_the_preview(
        self, undogate_kit: Kit
    ) -> None:
        kit, case = undogate_kit, undogate_kit.case
        start = case.state()
        listed = kit.gateway.call("GET", "/api/v1/resources", agent=True).json()
        assert {"id": RESOURCE, "kind": case.kind} in [
            {"id": r["id"], "kind": r["kind"]} for r in listed["resources"]
        ]
        job = kit.prepare(case.change)
        preview = kit.gateway.preview(job, "apply")
        assert preview.status_code == 200, preview.text
        token = preview.json()["preview_token"]
        dry = kit.gateway.confirm(job, token, dry_run=True)
        assert dry.status_code == 200, dry.text
        planned = dry.json()["requests"]
        assert planned and case.state() == start and not kit.proxy.writes()
        done = kit.gateway.confirm(job, token)
        assert done.status_code == 200 and done.json()["job"]["state"] == "applied", done.text
        sent = kit.proxy.writes()
        assert len(sent) == len(planned)
        for request, seen in zip(planned, sent, strict=True):
            assert (seen.method, seen.path) == (request["method"], _path(request["url"]))
            assert seen.body == request["body"].encode("utf-8")
            headers = {k.lower(): v for k, v in seen.headers.items()}
            for name, value in case.headers.items():  # the static headers, shown
                assert request["headers"][name] == value
            for name, value in request["headers"].items():
                assert headers[name.lower()] == value
            shown = {k.lower() for k in request["headers"]}
            assert "authorization" not in shown
            # The credential was added by the gateway alone, as the preview said.
            added = request["authentication"]
            assert (added is None) == (case.token is None and case.auth is None), added
            for name in added["adds"] if added else ():
                assert name.lower() in headers and name.lower() not in shown
            if case.token is not None:
                assert headers["authorization"] == f"Bearer {case.token}"
        for secret in (case.token, *case.environ.values()):
            assert not secret or secret not in dry.text  # shown how, never with what
        assert case.state() != start
        assert kit.confirmed(job, "undo")["state"] == "undone"
        assert case.state() == start

    def test_a_stale_version_is_refused_and_nothing_is_written(self, undogate_kit: Kit) -> None:
        kit, case = undogate_kit, undogate_kit.case
        kit.verify()  # what lets the endpoint's answer to a stale version count as a refusal
        first = kit.gateway.receipt(kit.prepare(case.change))
        read = first["changes"][0]["prepared_version"]
        case.outside_edit()
        stale = kit.gateway.prepare(
            {"resource": RESOURCE, **case.other_change, "expected_version": read}
        )
        assert stale.status_code == 409, stale.text
        error = stale.json()["error"]
        assert error["code"] == "stale_version" and error["details"]["current_version"] != read
        job = kit.prepare(case.change)
        preview = kit.gateway.preview(job, "apply")
        assert preview.status_code == 200, preview.text
        edited: list[bytes] = []

        def edit() -> None:  # the version goes stale on the way to the endpoint
            case.outside_edit()
            edited.append(case.state())

        kit.proxy.arm("outside_edit", edit)
        before_write = len(kit.proxy.writes())
        kit.gateway.confirm(job, preview.json()["preview_token"])
        assert len(kit.proxy.writes()) == before_write + 1  # sent once, refused
        assert kit.actions(job) == [("apply", "refused")]
        assert kit.state_of(job) == "prepared"
        assert [case.state()] == edited  # the other client's edit, and nothing since

    def test_a_read_back_that_does_not_show_the_write_is_uncertain(self, undogate_kit: Kit) -> None:
        kit, case = undogate_kit, undogate_kit.case
        job = kit.prepare(case.change)
        kit.proxy.arm("stale_read_back")
        kit.gateway.operate(job, "apply")
        assert kit.actions(job) == [("apply", "uncertain")]
        assert kit.state_of(job) == "needs_review"
        other = kit.prepare(case.other_change)
        held = kit.gateway.preview(other, "apply")
        assert held.status_code == 409 and held.json()["error"]["code"] == "quarantined"
        assert kit.observation(job) == "looks_applied"
        assert kit.confirmed(job, "accept_observed")["state"] == "applied"
        assert kit.gateway.preview(other, "apply").status_code == 200  # quarantine lifted

    def test_a_lost_response_needs_review_then_is_reconciled(self, undogate_kit: Kit) -> None:
        kit, case = undogate_kit, undogate_kit.case
        start = case.state()
        job = kit.prepare(case.change)
        kit.proxy.arm("drop_response")
        kit.gateway.operate(job, "apply")
        assert kit.actions(job) == [("apply", "uncertain")]
        assert kit.state_of(job) == "needs_review" and len(kit.proxy.writes()) == 1
        assert kit.observation(job) == "looks_applied"
        assert kit.confirmed(job, "accept_observed")["state"] == "applied"
        assert kit.confirmed(job, "undo")["state"] == "undone"
        assert case.state() == start and len(kit.proxy.writes()) == 2

    @pytest.mark.parametrize(("operation", "point"), CELLS)
    def test_a_crash_cell(self, undogate_kit: Kit, operation: str, point: str) -> None:
        kit, case = undogate_kit, undogate_kit.case
        start = case.state()
        job = kit.prepare(case.change)
        if operation == "undo":
            assert kit.confirmed(job, "apply")["state"] == "applied"
        if operation == "accept_observed":
            kit.proxy.arm("drop_response")  # the job needs review first
            kit.gateway.operate(job, "apply")
        writes = len(kit.proxy.writes())
        _crash(kit, job, operation, point)
        receipt = kit.gateway.settled(job)
        assert "dispatching" not in {a["status"] for a in receipt["actions"]}
        sent = len(kit.proxy.writes()) - writes  # never twice; none before the send
        assert sent == (0 if point == "after_intent" or operation == "accept_observed" else 1)
        if operation == "accept_observed":
            # Killed before the acceptance committed, the job still needs review.
            if point == "after_readback":
                assert receipt["state"] == "needs_review"
                kit.confirmed(job, "accept_observed")
        elif point == "after_outcome":  # the outcome was recorded: nothing to settle
            assert receipt["actions"][-1]["status"] == "done"
        else:  # an interrupted write is uncertain until a reviewer accepts what is seen
            assert receipt["state"] == "needs_review"
            assert receipt["actions"][-1]["status"] == "uncertain"
            unsent = point == "after_intent"
            settled = {"apply": ("applied", "prepared"), "undo": ("undone", "applied")}
            expected = settled[operation][1 if unsent else 0]
            assert kit.confirmed(job, "accept_observed")["state"] == expected
            if unsent:  # it never left: the operation runs again, once
                assert kit.confirmed(job, operation)["state"] == settled[operation][0]
        final = kit.state_of(job)
        assert final == ("undone" if operation == "undo" else "applied"), final
        if operation != "undo":
            assert kit.confirmed(job, "undo")["state"] == "undone"
        assert case.state() == start

    @pytest.mark.parametrize("point", CREATE_POINTS)
    def test_a_crash_cell_of_a_create(self, undogate_kit: Kit, point: str) -> None:
        kit, case = undogate_kit, undogate_kit.case
        if case.create is None:
            pytest.skip(f"{case.kind}: the case creates nothing")
        kit.verify_undos()
        start = case.state()
        job = kit.prepare(case.create)
        writes = len(kit.proxy.writes())
        _crash(kit, job, "apply", point)
        receipt = kit.gateway.receipt(job)
        assert "dispatching" not in {a["status"] for a in receipt["actions"]}
        assert len(kit.proxy.writes()) - writes == (0 if point == "after_intent" else 1)
        if point != "after_outcome":  # uncertain until a reviewer accepts what is seen
            assert receipt["state"] == "needs_review"
            unsent = point == "after_intent"
            settled = kit.confirmed(job, "accept_observed")["state"]
            assert settled == ("prepared" if unsent else "applied")
            if unsent:  # it never left: the create runs again, once
                assert kit.confirmed(job, "apply")["state"] == "applied"
        assert kit.state_of(job) == "applied" and case.state() != start
        assert kit.confirmed(job, "undo")["state"] == "undone"
        assert case.state() == start

    def test_the_endpoint_check_passes_on_the_test_copy(self, undogate_kit: Kit) -> None:
        undogate_kit.verify()

    def test_members_of_other_kinds_are_refused_and_nothing_is_prepared(
        self, undogate_kit: Kit
    ) -> None:
        kit, case = undogate_kit, undogate_kit.case
        mine = {m.name for m in adapter_for(case.kind).change_members}
        for name, member in change_members().items():
            if name in mine:
                continue
            value = _example(member.schema)
            refused = kit.gateway.prepare({"resource": RESOURCE, **case.change, name: value})
            assert refused.status_code == 400, (name, refused.text)
            assert refused.json()["error"]["code"] == "invalid_request"
        assert kit.gateway.call("GET", "/api/v1/jobs?agent=kit-agent").json()["jobs"] == []


def _example(schema: Mapping[str, Any]) -> Any:
    """A value a member's schema accepts that asks something (never empty or false)."""
    return {"object": {"x": "y"}, "array": ["x"], "boolean": True}.get(str(schema.get("type")), "x")


def _crash(kit: Kit, job: str, operation: str, point: str) -> None:
    """Run ``operation`` on a gateway that dies at ``point``; then start a clean one."""
    gateway = kit.gateway
    if point == "after_send":
        kit.proxy.arm("hold_response")  # the write reaches the endpoint, its answer waits
        worker = threading.Thread(target=_quietly, args=(gateway, job, operation))
        gateway.start()
        writes = len(kit.proxy.writes())
        worker.start()
        while len(kit.proxy.writes()) == writes and worker.is_alive():
            worker.join(timeout=0.01)  # until the write is on the wire
        gateway.kill()
        kit.proxy.release()
        worker.join(timeout=60)
    else:
        gateway.start(crash=f"{operation}:{point}")
        _quietly(gateway, job, operation)
    assert gateway.died_of_sigkill()
    gateway.start()


def _quietly(gateway: ServedGateway, job: str, operation: str) -> None:
    with contextlib.suppress(httpx.TransportError):  # the gateway dies mid-request
        gateway.operate(job, operation)


__all__ = [
    "ALL_CELLS",
    "CELLS",
    "COPY",
    "CREATE_POINTS",
    "RESOURCE",
    "TOKEN_ENV",
    "KindCase",
    "KindContract",
    "Kit",
]
