"""The store contract: what every ledger engine promises, through the protocol only.

Each test takes ``store`` (tests/ledger/conftest.py), so it runs once per engine. No
SQL here and no engine type: a test that needs to look inside an engine belongs in that
engine's own tests (tests/test_ledger.py for SQLite). The last test checks that every
verb of the protocol is exercised here.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from undogate.errors import ChangedSincePreview, LedgerError, PreviewUsed
from undogate.jobs import (
    ABSENT,
    UNRESOLVED_STATES,
    ActionStatus,
    Change,
    ChangeState,
    Job,
    JobState,
    Observation,
    Operation,
    SideValue,
)
from undogate.jsonvalue import JsonNumber
from undogate.ledger import EarlierJob, OpenChange, Reader, Store, StoredPasskey, Transaction

OWNER = "op_owner"
AGENT = "agent-a"


def change(
    index: int,
    resource_id: str = "customer",
    fields: tuple[str, ...] = ("status",),
    after: SideValue | None = None,
) -> Change:
    """One change (the one place that knows how a change is built). Its kind is opaque to
    the ledger; a side may be absent (a create's before, a delete's after)."""
    return Change(
        index=index,
        resource_id=resource_id,
        kind="some_kind",
        fingerprint="fp-1",
        fields=fields,
        before={"status": "lead", "n": JsonNumber("12345678901234567890.5")},
        after={"status": "customer"} if after is None else after,
        media_type="application/json",
        prepared_etag='"v1"',
        assertion_kind=None,
    )


def job(
    job_id: str,
    *changes: Change,
    owner: str = OWNER,
    agent: str = AGENT,
    key: str | None = None,
    state: JobState = JobState.PREPARED,
) -> Job:
    now = time.time()
    return Job(
        id=job_id,
        owner_id=owner,
        agent_id=agent,
        summary=f"summary of {job_id}",
        attribution_label="ticket 7",
        idempotency_key=key,
        state=state,
        undo_started=False,
        created_at=now,
        updated_at=now,
        changes=changes or (change(0),),
    )


def insert(store: Store, *jobs: Job, payload: int = 10) -> None:
    def write(tx: Transaction) -> None:
        for j in jobs:
            tx.insert_job(j, f"digest-{j.id}", payload)

    store.write(write)


def event(tx: Transaction, job_id: str | None, operation: str, **extra: str) -> None:
    tx.add_event(job_id=job_id, actor="test:me", access_path="test", operation=operation, **extra)


# -- the door ------------------------------------------------------------------------------


def test_a_write_commits_and_a_read_sees_it(store: Store) -> None:
    insert(store, job("job_1"))
    loaded = store.read(lambda tx: tx.load_job("job_1"))
    assert loaded is not None and loaded.state is JobState.PREPARED
    assert store.load_job("job_missing") is None


def test_a_failing_write_keeps_nothing_and_its_error_passes_through(store: Store) -> None:
    class Boom(Exception):
        pass

    def half(tx: Transaction) -> None:
        tx.insert_job(job("job_1"), "digest", 10)
        event(tx, "job_1", "prepare")
        raise Boom

    with pytest.raises(Boom):
        store.write(half)
    assert store.load_job("job_1") is None
    assert store.events("job_1") == []
    assert store.counter("job_count") == 0


def test_a_write_reads_its_own_rows_even_through_read(store: Store) -> None:
    def write(tx: Transaction) -> tuple[bool, bool]:
        tx.insert_job(job("job_1"), "digest", 10)
        direct = tx.load_job("job_1") is not None
        nested = store.read(lambda r: r.load_job("job_1")) is not None
        return direct, nested

    assert store.write(write) == (True, True)


def test_a_read_elsewhere_sees_only_what_is_committed(store: Store) -> None:
    inside, release = threading.Event(), threading.Event()
    seen: list[bool] = []

    def slow_write(tx: Transaction) -> None:
        tx.insert_job(job("job_1"), "digest", 10)
        inside.set()
        assert release.wait(10)

    writer = threading.Thread(target=store.write, args=(slow_write,))
    writer.start()
    try:
        assert inside.wait(10)
        seen.append(store.load_job("job_1") is not None)  # another thread, mid-write
    finally:
        release.set()
        writer.join(10)
    seen.append(store.load_job("job_1") is not None)
    assert seen == [False, True]


def test_writes_never_interleave(store: Store) -> None:
    seqs: list[int] = []
    lock = threading.Lock()

    def take(_: int) -> None:
        for _ in range(20):
            got = store.write(lambda tx: tx.next_seq())
            with lock:
                seqs.append(got)

    threads = [threading.Thread(target=take, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(seqs) == list(range(1, 81))
    assert store.counter("op_seq") == 80


# -- jobs ------------------------------------------------------------------------------------


def test_a_job_comes_back_as_it_was_recorded(store: Store) -> None:
    original = job("job_1", change(0), change(1, "ticket", (), after=ABSENT), key="k1")
    insert(store, original, payload=123)
    loaded = store.load_job("job_1")
    assert loaded == original
    assert store.read(lambda tx: tx.load_job("job_1", with_actions=False)) == original
    assert store.counter("job_count") == 1
    assert store.read(lambda tx: tx.usage()).jobs == 1
    assert store.read(lambda tx: tx.usage()).payload_bytes == 123


def test_jobs_are_listed_newest_first_per_owner_and_agent(store: Store) -> None:
    insert(store, job("job_1"), job("job_2", change(0), change(1, "ticket")))
    insert(store, job("job_3", agent="agent-b"), job("job_4", owner="op_other"))
    listed = store.list_jobs(OWNER, AGENT)
    assert [(j[0], j[1], j[2], j[4]) for j in listed] == [
        ("job_2", "prepared", "summary of job_2", 2),
        ("job_1", "prepared", "summary of job_1", 1),
    ]
    assert [j[0] for j in store.read(lambda tx: tx.list_jobs(OWNER, AGENT, 1))] == ["job_2"]


def test_an_idempotency_key_finds_its_newest_job(store: Store) -> None:
    insert(store, job("job_1", key="k1"), job("job_2", key="k2"))
    found = store.read(lambda tx: tx.find_idempotent(OWNER, AGENT, "k1"))
    assert isinstance(found, EarlierJob)
    assert (found.id, found.request_digest) == ("job_1", "digest-job_1")
    assert found.created_at == pytest.approx(time.time(), abs=60)
    assert store.read(lambda tx: tx.find_idempotent(OWNER, "agent-b", "k1")) is None
    assert store.read(lambda tx: tx.find_idempotent(OWNER, AGENT, "k3")) is None


def test_job_and_change_states_move_and_keep_what_is_not_given(store: Store) -> None:
    insert(store, job("job_1"))

    def move(tx: Transaction) -> None:
        tx.set_job_state("job_1", JobState.UNDOING, undo_started=True)
        tx.set_change_state("job_1", 0, ChangeState.APPLIED, applied_etag='"v2"', applied_seq=7)

    store.write(move)
    store.write(lambda tx: tx.set_job_state("job_1", JobState.APPLIED))
    store.write(lambda tx: tx.set_change_state("job_1", 0, ChangeState.UNCERTAIN))
    loaded = store.load_job("job_1")
    assert loaded is not None
    assert (loaded.state, loaded.undo_started) == (JobState.APPLIED, True)
    (moved,) = loaded.changes
    assert (moved.state, moved.applied_etag, moved.applied_at) == (
        ChangeState.UNCERTAIN,
        '"v2"',
        7,
    )
    assert loaded.updated_at >= loaded.created_at
    store.write(
        lambda tx: tx.set_job_state("job_1", JobState.INVALIDATED, invalidated_reason="moved")
    )
    invalidated = store.load_job("job_1")
    assert invalidated is not None and invalidated.invalidated_reason == "moved"


def test_confirm_attempts_are_counted(store: Store) -> None:
    insert(store, job("job_1"))
    assert store.read(lambda tx: tx.confirm_attempts("job_1")) == 0
    store.write(lambda tx: tx.count_confirm_attempt("job_1"))
    store.write(lambda tx: tx.count_confirm_attempt("job_1"))
    assert store.read(lambda tx: tx.confirm_attempts("job_1")) == 2


def test_quotas_count_unresolved_jobs_no_further_than_asked(store: Store) -> None:
    states = list(JobState)
    jobs = [job(f"job_{n}", state=s) for n, s in enumerate(states)]
    insert(store, *jobs, job("job_b", agent="agent-b"), job("job_x", owner="op_other"))
    unresolved = len(UNRESOLVED_STATES)

    def counts(tx: Reader) -> tuple[int, int, int, int]:
        return (
            tx.count_unresolved(OWNER, AGENT, stop_at=100),
            tx.count_unresolved(OWNER, None, stop_at=100),
            tx.count_unresolved(OWNER, AGENT, stop_at=2),
            tx.count_unfinished(OWNER),
        )

    finished = {JobState.UNDONE, JobState.REJECTED, JobState.INVALIDATED}
    assert store.read(counts) == (
        unresolved,
        unresolved + 1,
        2,
        len(states) - len(finished) + 1,  # applied is resolved, but not finished
    )


# -- previews ----------------------------------------------------------------------------------


def preview(tx: Transaction, token_hash: str, job_id: str = "job_1") -> None:
    tx.insert_preview(
        token_hash=token_hash,
        job_id=job_id,
        operation=Operation.APPLY,
        expires_at=time.time() + 300,
        snapshot={"0": '"v1"'},
    )


def test_a_preview_is_kept_and_claimed_once(store: Store) -> None:
    insert(store, job("job_1"))
    store.write(lambda tx: preview(tx, "hash-1"))
    stored = store.read(lambda tx: tx.load_preview("hash-1"))
    assert stored is not None
    assert (stored.job_id, stored.operation, stored.snapshot) == (
        "job_1",
        Operation.APPLY,
        {"0": '"v1"'},
    )
    assert stored.consumed_at is None and stored.op_seq is None
    assert stored.expires_at > stored.created_at
    assert store.read(lambda tx: tx.load_preview("hash-unknown")) is None
    assert store.read(lambda tx: tx.latest_consumed_seq("job_1")) is None

    seq = store.write(lambda tx: tx.claim_preview("hash-1", "job_1", "prepared"))
    claimed = store.read(lambda tx: tx.load_preview("hash-1"))
    assert claimed is not None and claimed.op_seq == seq and claimed.consumed_at is not None
    assert store.read(lambda tx: tx.latest_consumed_seq("job_1")) == seq
    with pytest.raises(PreviewUsed, match="used by another confirm"):
        store.write(lambda tx: tx.claim_preview("hash-1", "job_1", "prepared"))
    with pytest.raises(PreviewUsed):
        store.write(lambda tx: tx.claim_preview("hash-unknown", "job_1", "prepared"))


def test_a_preview_made_before_another_operation_can_never_be_claimed(store: Store) -> None:
    insert(store, job("job_1"))
    store.write(lambda tx: (preview(tx, "old"), preview(tx, "new")))
    store.write(lambda tx: tx.claim_preview("new", "job_1", "prepared"))
    with pytest.raises(PreviewUsed, match="another operation ran"):
        store.write(lambda tx: tx.claim_preview("old", "job_1", "prepared"))
    store.write(lambda tx: preview(tx, "after"))  # made after the claim: it may run
    assert store.write(lambda tx: tx.claim_preview("after", "job_1", "prepared")) > 0


def test_a_preview_is_not_claimed_for_a_job_that_moved_on(store: Store) -> None:
    insert(store, job("job_1"))
    store.write(lambda tx: preview(tx, "hash-1"))
    with pytest.raises(ChangedSincePreview):
        store.write(lambda tx: tx.claim_preview("hash-1", "job_1", "applied"))
    stored = store.read(lambda tx: tx.load_preview("hash-1"))
    assert stored is not None and stored.consumed_at is None  # the refusal kept nothing


def test_of_racing_claims_exactly_one_wins(store: Store) -> None:
    insert(store, job("job_1"))
    store.write(lambda tx: preview(tx, "hash-1"))
    start = threading.Barrier(6)
    won: list[int] = []
    lost: list[Exception] = []

    def claim() -> None:
        start.wait(10)
        try:
            won.append(store.write(lambda tx: tx.claim_preview("hash-1", "job_1", "prepared")))
        except PreviewUsed as exc:
            lost.append(exc)

    threads = [threading.Thread(target=claim) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(won) == 1 and len(lost) == 5


# -- actions and overlaps -----------------------------------------------------------------------


def begin(tx: Transaction, job_id: str = "job_1", index: int = 0) -> int:
    return tx.begin_action(
        job_id=job_id,
        change_idx=index,
        operation=Operation.APPLY,
        method="PATCH",
        url="https://example.test/records/customer",
        if_match='"v1"',
    )


def test_an_action_is_recorded_before_and_after(store: Store) -> None:
    insert(store, job("job_1"))
    action_id = store.write(begin)
    (in_flight,) = store.read(lambda tx: tx.in_flight_actions())
    assert (in_flight.id, in_flight.job_id, in_flight.change_index) == (action_id, "job_1", 0)
    assert in_flight.operation is Operation.APPLY
    loaded = store.load_job("job_1")
    assert loaded is not None
    (action,) = loaded.actions
    assert (action.status, action.method, action.if_match) == (
        ActionStatus.DISPATCHING,
        "PATCH",
        '"v1"',
    )
    assert action.finished_at is None

    store.write(
        lambda tx: tx.finish_action(
            action_id,
            ActionStatus.UNCERTAIN,
            response_status=500,
            address="127.0.0.1",
            detail="HTTP 500",
        )
    )
    store.write(
        lambda tx: tx.finish_action(
            action_id, ActionStatus.ACCEPTED, observation=Observation.LOOKS_APPLIED
        )
    )
    assert store.read(lambda tx: tx.in_flight_actions()) == []
    finished = store.load_job("job_1")
    assert finished is not None
    (done,) = finished.actions
    assert (done.status, done.response_status, done.address, done.detail) == (
        ActionStatus.ACCEPTED,
        500,
        "127.0.0.1",
        "HTTP 500",
    )
    assert done.observation is Observation.LOOKS_APPLIED and done.finished_at is not None
    bare = store.read(lambda tx: tx.load_job("job_1", with_actions=False))
    assert bare is not None and bare.actions == ()


def test_open_changes_are_other_jobs_writes_in_flight_then_held_changes(store: Store) -> None:
    insert(
        store,
        job("job_mine"),
        job("job_applied"),
        job("job_uncertain", change(0, fields=("owner",))),
        job("job_pending"),
        job("job_flying"),
        job("job_elsewhere", change(0, "ticket")),
    )

    def hold(tx: Transaction) -> None:
        tx.set_change_state("job_mine", 0, ChangeState.APPLIED, applied_seq=1)
        tx.set_change_state("job_applied", 0, ChangeState.APPLIED, applied_seq=2)
        tx.set_change_state("job_uncertain", 0, ChangeState.UNCERTAIN)
        tx.set_change_state("job_elsewhere", 0, ChangeState.APPLIED, applied_seq=3)
        begin(tx, "job_flying")
        begin(tx, "job_mine")

    store.write(hold)
    found = store.read(lambda tx: tx.open_changes("customer", "job_mine"))
    assert found[0] == OpenChange(
        job_id="job_flying",
        kind="some_kind",
        fields=("status",),
        state=ChangeState.PENDING,
        applied_seq=None,
        fingerprint="fp-1",
        in_flight=True,
    )
    held = {(o.job_id, o.state, o.applied_seq, o.fields, o.in_flight) for o in found[1:]}
    assert held == {
        ("job_applied", ChangeState.APPLIED, 2, ("status",), False),
        ("job_uncertain", ChangeState.UNCERTAIN, None, ("owner",), False),
    }


def test_a_write_that_locks_its_resources_sees_every_earlier_intent(store: Store) -> None:
    insert(store, job("job_1"), job("job_2"))
    store.write(lambda tx: (tx.lock_resources(["customer"]), begin(tx, "job_1")))

    def check(tx: Transaction) -> list[str]:
        tx.lock_resources(["ticket", "customer", "customer"])  # any order, repeats allowed
        return [o.job_id for o in tx.open_changes("customer", "job_2")]

    assert store.write(check) == ["job_1"]


# -- events ------------------------------------------------------------------------------------


def test_events_come_back_in_order_with_their_detail(store: Store) -> None:
    insert(store, job("job_1"))

    def record(tx: Transaction) -> None:
        event(tx, "job_1", "prepare", to_state="prepared")
        tx.add_event(
            job_id="job_1",
            actor="operator:op",
            access_path="api",
            operation="reject",
            target="customer",
            from_state="prepared",
            to_state="rejected",
            detail={"why": "no", "list": ["a", "b"]},
        )
        event(tx, None, "credential_create_operator")

    store.write(record)
    first, second = store.events("job_1")
    assert (first.operation, first.to_state, first.detail) == ("prepare", "prepared", None)
    assert second.id > first.id and second.at >= first.at
    assert (second.actor, second.access_path, second.target) == ("operator:op", "api", "customer")
    assert (second.from_state, second.to_state) == ("prepared", "rejected")
    assert second.detail == {"why": "no", "list": ["a", "b"]}
    assert store.read(lambda tx: tx.events("job_1")) == [first, second]


# -- start-up recovery -------------------------------------------------------------------------


def test_recovery_finds_running_jobs_and_jobs_under_another_identity(store: Store) -> None:
    insert(
        store,
        job("job_applying", state=JobState.APPLYING),
        job("job_undoing", state=JobState.UNDOING),
        job("job_review", state=JobState.NEEDS_REVIEW),
        job("job_undone", state=JobState.UNDONE),
        job("job_ticket", change(0, "ticket")),
    )
    assert sorted(store.read(lambda tx: tx.running_jobs())) == ["job_applying", "job_undoing"]
    unfinished = store.read(lambda tx: tx.unfinished_jobs_on("customer", "fp-2"))
    assert sorted(unfinished) == [
        ("job_applying", JobState.APPLYING),
        ("job_review", JobState.NEEDS_REVIEW),
        ("job_undoing", JobState.UNDOING),
    ]
    assert store.read(lambda tx: tx.unfinished_jobs_on("customer", "fp-1")) == []


def test_resource_identities_are_replaced_whole(store: Store) -> None:
    assert store.read(lambda tx: tx.resource_identities()) == {}
    store.write(lambda tx: tx.replace_resource_identities({"customer": "fp-1", "ticket": "t"}))
    store.write(lambda tx: tx.replace_resource_identities({"customer": "fp-2"}))
    assert store.read(lambda tx: tx.resource_identities()) == {"customer": "fp-2"}


# -- credentials -------------------------------------------------------------------------------


def credential(tx: Transaction, cred_id: str, kind: str = "operator", owner: str = "") -> None:
    tx.insert_credential(
        credential_id=cred_id,
        kind="operator" if kind == "operator" else "agent",
        owner_id=owner or cred_id,
        agent_id=None if kind == "operator" else AGENT,
        scopes=("agents:read", "agents:write") if kind == "operator" else (),
        agents=("agent-a", "agent-b") if cred_id == "op_1" else None,
        label=f"label of {cred_id}",
        key_hash=f"hash-{cred_id}",
        created_at=time.time(),
    )


def test_credentials_are_kept_and_revoked_once(store: Store) -> None:
    def issue(tx: Transaction) -> None:
        credential(tx, "op_1")
        credential(tx, "op_2")
        credential(tx, "at_b", "agent", owner="op_1")
        credential(tx, "at_a", "agent", owner="op_1")
        credential(tx, "at_c", "agent", owner="op_2")

    store.write(issue)
    stored = store.read(lambda tx: tx.credential("op_1"))
    assert stored is not None
    assert (stored.kind, stored.owner_id, stored.agent_id, stored.label) == (
        "operator",
        "op_1",
        None,
        "label of op_1",
    )
    assert stored.scopes == ("agents:read", "agents:write")
    assert stored.agents == ("agent-a", "agent-b")
    assert (stored.key_hash, stored.revoked_at) == ("hash-op_1", None)
    token = store.read(lambda tx: tx.credential("at_a"))
    assert token is not None and (token.kind, token.agent_id, token.scopes) == ("agent", AGENT, ())
    assert token.agents is None
    assert store.read(lambda tx: tx.credential("op_unknown")) is None
    assert [c.id for c in store.read(lambda tx: tx.credentials())] == [
        "op_1",
        "op_2",
        "at_b",
        "at_a",
        "at_c",
    ]
    assert store.read(lambda tx: tx.count_live_operators()) == 2
    assert store.read(lambda tx: tx.live_agent_tokens("op_1")) == ["at_a", "at_b"]

    at = time.time()
    store.write(lambda tx: tx.revoke_credential("at_a", at=at, reason="lost"))
    store.write(lambda tx: tx.revoke_credential("op_2", at=at, reason="revoked"))
    revoked = store.read(lambda tx: tx.credential("at_a"))
    assert revoked is not None and revoked.revoked_at == pytest.approx(at)
    assert store.read(lambda tx: tx.live_agent_tokens("op_1")) == ["at_b"]
    assert store.read(lambda tx: tx.count_live_operators()) == 1
    with pytest.raises(LedgerError):
        store.write(lambda tx: tx.revoke_credential("at_a", at=time.time(), reason="again"))
    again = store.read(lambda tx: tx.credential("at_a"))
    assert again is not None and again.revoked_at == pytest.approx(at)


# -- passkeys (SPEC §14) -------------------------------------------------------------------------


def passkey(passkey_id: str, owner: str = "op_1") -> StoredPasskey:
    return StoredPasskey(
        id=passkey_id,
        owner_id=owner,
        label="laptop",
        public_key="pQECAyYgASFYIA",
        sign_count=3,
        rp_id="localhost",
        origin="http://localhost:8080",
        created_at=time.time(),
        revoked_at=None,
    )


def test_passkeys_are_kept_per_owner_used_once_and_revoked_once(store: Store) -> None:
    store.write(lambda tx: tx.insert_passkey(passkey("pk_a")))
    store.write(lambda tx: tx.insert_passkey(passkey("pk_b", owner="op_2")))
    assert [p.id for p in store.read(lambda tx: tx.passkeys("op_1"))] == ["pk_a"]
    made = passkey("pk_a")
    kept = store.read(lambda tx: tx.passkey("pk_a"))
    assert kept is not None and vars(kept) == {**vars(made), "created_at": kept.created_at}
    assert kept.created_at == pytest.approx(made.created_at)
    assert store.read(lambda tx: tx.passkey("pk_none")) is None
    assert not store.read(lambda tx: tx.passkey_challenge_used("c1"))
    store.write(
        lambda tx: tx.record_passkey_use(
            challenge="c1", passkey_id="pk_a", job_id="job_1", sign_count=9
        )
    )
    assert store.read(lambda tx: tx.passkey_challenge_used("c1"))
    found = store.read(lambda tx: tx.passkey("pk_a"))
    assert found is not None and found.sign_count == 9
    with pytest.raises(LedgerError):  # a challenge approves once, whatever the caller does
        store.write(
            lambda tx: tx.record_passkey_use(
                challenge="c1", passkey_id="pk_a", job_id="job_2", sign_count=10
            )
        )
    store.write(lambda tx: tx.revoke_passkey("pk_a"))
    revoked = store.read(lambda tx: tx.passkey("pk_a"))
    assert revoked is not None and revoked.revoked_at is not None
    with pytest.raises(LedgerError):
        store.write(lambda tx: tx.revoke_passkey("pk_a"))


# -- endpoint checks ---------------------------------------------------------------------------


def test_the_latest_endpoint_check_under_the_current_identity_counts(store: Store) -> None:
    def check(passed: bool, fingerprint: str = "fp-1") -> int:
        return store.write(
            lambda tx: tx.record_endpoint_check(
                resource_id="customer",
                test_copy_id="customer-copy",
                production_fingerprint=fingerprint,
                test_copy_fingerprint="fp-copy",
                passed=passed,
                evidence='{"steps": []}',
            )
        )

    assert not store.read(lambda tx: tx.latest_check_passed("customer", "fp-1"))
    first = check(True)
    assert store.read(lambda tx: tx.latest_check_passed("customer", "fp-1"))
    assert check(False) > first
    assert not store.read(lambda tx: tx.latest_check_passed("customer", "fp-1"))
    check(True, "fp-2")
    assert store.read(lambda tx: tx.latest_check_passed("customer", "fp-2"))
    assert not store.read(lambda tx: tx.latest_check_passed("ticket", "fp-1"))


# -- closing -----------------------------------------------------------------------------------


def test_a_store_says_which_ledger_it_is_and_where(store: Store) -> None:
    assert store.location and store.location in store.describe()
    assert "password" not in store.describe().lower()


def test_close_is_idempotent(store: Store) -> None:
    store.close()
    store.close()


# -- the suite covers the protocol ----------------------------------------------------------


def test_every_verb_of_the_protocol_is_exercised_here() -> None:
    source = Path(__file__).read_text()
    verbs = {
        name
        for proto in (Reader, Transaction, Store)
        for name in vars(proto)
        if not name.startswith("_") and callable(getattr(proto, name))
    }
    missing = sorted(v for v in verbs if f".{v}(" not in source)
    assert verbs and not missing, missing
