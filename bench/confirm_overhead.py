"""Figure 1: confirming an 8-change mixed job vs the floor of the same requests.

Floor: the whole-preview reads (8 GETs), 8 conditional writes and 8 read-backs sent
directly with one httpx client, plus 16 durable commits on the same engine as the ledger
(an intent before and an outcome after each write; fsync'd SQLite, or PostgreSQL with
``synchronous_commit`` on), in the same process, against the same server.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from undogate.chain import ChainedRow
from undogate.config import parse_config
from undogate.jobs import Actor, ChangeRequest, Operation, PrepareRequest
from undogate.jsonvalue import dumps, loads
from undogate.ledger import open_store
from undogate.ledger.postgres import PostgresTransaction
from undogate.ledger.sql_chain import ChainVerbs
from undogate.net import PinnedClient
from undogate.operations.confirm import confirm_preview
from undogate.operations.context import Context
from undogate.operations.prepare import prepare_job
from undogate.operations.preview import preview_job
from undogate.operations.recovery import recover

from .common import (
    DurableCommits,
    PostgresCommits,
    Stat,
    contract_server,
    paired_ratio,
    private_dir,
)

OWNER = Actor(id="bench", owner_id="bench", kind="operator", access_path="bench")
AGENT = Actor(id="bench-agent", owner_id="bench", kind="agent", access_path="bench")
RECORDS = [f"rec-{i}" for i in range(4)]
DOCS = [f"doc-{i}.md" for i in range(4)]


def _seed(data: Path) -> None:
    data.mkdir(parents=True)
    for i, name in enumerate(RECORDS):
        (data / f"{name}.json").write_text(
            f'{{"id": "{name}", "status": "s0", "owner": "o", "n": {i}}}\n'
        )
    for name in DOCS:
        (data / name).write_text("# Notes\n\n" + "line of text\n" * 40)


class ChainClock:
    """Time a confirm spends in the hash chain's inserts (docs/proof.md): the chain lock,
    each event's hash and the insert itself (which an event costs without the chain too,
    so this is an upper bound on the chain's own cost). On SQLite that includes the head
    read. On PostgreSQL the inserts are pipelined and the database reads the head and
    hashes the link (ledger/postgres.py), so what is timed there is the client's side
    and the round trip that brings the write's deferred checks' answers
    (``check_before_commit``); the server's part of the inserts is paid in the commit's
    round trip. The bench wraps the one chained insert of each engine; nothing else is
    changed."""

    def __init__(self) -> None:
        self.spent = 0.0
        self.events = 0

    @contextmanager
    def installed(self) -> Iterator[ChainClock]:
        engines = [
            cls for cls in (ChainVerbs, PostgresTransaction) if "_insert_chained" in vars(cls)
        ]
        originals = {cls: vars(cls)["_insert_chained"] for cls in engines}

        def timed(original: Callable[[ChainVerbs, list[ChainedRow]], None]) -> Callable[..., None]:
            def run(tx: ChainVerbs, rows: list[ChainedRow]) -> None:
                started = time.perf_counter()
                try:
                    original(tx, list(rows))
                finally:
                    self.spent += time.perf_counter() - started
                    self.events += len(rows)

            return run

        for cls, original in originals.items():
            cls._insert_chained = timed(original)  # type: ignore[method-assign]
        try:
            yield self
        finally:
            for cls, original in originals.items():
                cls._insert_chained = original  # type: ignore[method-assign]


def run(work: Path, trials: int = 9, ledger: str | None = None) -> dict[str, Stat]:
    """``ledger``: a PostgreSQL URL for the ledger and the floor's commits (else SQLite)."""
    data = work / "contract"
    _seed(data)
    with contract_server(data) as base:
        resources = [
            {
                "id": name,
                "agent_id": "bench-agent",
                "name": name,
                "kind": "json_record",
                "url": f"{base}/records/{name}",
                "fields": ["status", "owner"],
                "conditional_writes": True,
                "allow_loopback_http": True,
            }
            for name in RECORDS
        ] + [
            {
                "id": name.replace(".", "-"),
                "agent_id": "bench-agent",
                "name": name,
                "kind": "webdav_text",
                "url": f"{base}/docs/{name}",
                "conditional_writes": True,
                "allow_loopback_http": True,
            }
            for name in DOCS
        ]
        server: dict[str, str] = {"data_dir": str(private_dir(work / "ledger"))}
        if ledger:
            server["ledger"] = ledger
        config = parse_config(
            {
                "server": server,
                "limits": {"max_jobs": 100000},
                "resources": resources,
                "agents": [{"id": "bench-agent", "tools": ["prepare_changes"]}],
            }
        )
        store = open_store(config.server)
        http = PinnedClient()
        gw = Context(config=config, ledger=store, http=http)
        recover(store, config)
        floor_db: DurableCommits | PostgresCommits = (
            PostgresCommits(ledger)
            if ledger
            else DurableCommits(private_dir(work / "floor") / "floor.sqlite3")
        )
        client = httpx.Client(trust_env=False)
        measured: list[float] = []
        floor: list[float] = []
        chain: list[float] = []
        chain_events: list[float] = []
        clock = ChainClock()
        try:
            for trial in range(trials + 1):
                value = f"s{trial + 1}"
                changes = [
                    ChangeRequest(resource_id=name, set={"status": value}) for name in RECORDS
                ] + [
                    ChangeRequest(
                        resource_id=name.replace(".", "-"),
                        text=f"# Notes\n\nrevision {value}\n" + "line of text\n" * 40,
                    )
                    for name in DOCS
                ]
                request = PrepareRequest("bench", tuple(changes))
                job = prepare_job(gw, AGENT, "bench-agent", request).job
                token = preview_job(gw, OWNER, job, Operation.APPLY).token
                assert token
                clock.spent, clock.events = 0.0, 0
                with clock.installed():
                    started = time.perf_counter()
                    loaded = gw.get_job(OWNER.owner_id, job.id)  # as a surface loads it
                    result = confirm_preview(gw, OWNER, loaded, token)
                    elapsed = time.perf_counter() - started
                assert result.job.state.value == "applied", result.job.state
                floor_elapsed = _floor(client, floor_db, base, f"f{trial}")
                if trial:  # the first pair warms connections and caches
                    measured.append(elapsed)
                    floor.append(floor_elapsed)
                    chain.append(clock.spent)
                    chain_events.append(clock.events)
        finally:
            client.close()
            floor_db.close()
            http.close()
            store.close()
    return {
        "confirm": Stat.of(measured),
        "floor": Stat.of(floor),
        "ratio": paired_ratio(measured, floor),
        "chain": Stat.of(chain),
        "chain_share": Stat.of([c / m for c, m in zip(chain, measured, strict=True)]),
        "chain_events": Stat.of(chain_events),
    }


def _floor(
    client: httpx.Client, db: DurableCommits | PostgresCommits, base: str, value: str
) -> float:
    urls = [f"{base}/records/{n}" for n in RECORDS] + [f"{base}/docs/{n}" for n in DOCS]
    started = time.perf_counter()
    etags = {}
    types = {}
    for url in urls:  # the whole-preview reads
        r = client.get(url)
        etags[url] = r.headers["etag"]
        types[url] = r.headers["content-type"]
    for url in urls:
        db.commit("intent")
        if "/records/" in url:
            body = dumps([{"op": "replace", "path": "/status", "value": value}])
            client.patch(
                url,
                content=body.encode(),
                headers={
                    "Content-Type": "application/json-patch+json",
                    "If-Match": etags[url],
                },
            )
        else:
            client.put(
                url,
                content=f"floor {value}\n".encode(),
                headers={"Content-Type": types[url], "If-Match": etags[url]},
            )
        readback = client.get(url)  # the read-back
        if "/records/" in url:
            loads(readback.content)
        db.commit("outcome")
    return time.perf_counter() - started
