"""``vcard``: one contact, its allow-listed properties set and removed by a conditional
PUT of the card as read, on real Radicale 3 (basic auth; it re-serializes what it
stores) and Xandikos (it stores a card byte for byte).

Every guard and read-back compares properties, never bytes: Radicale's reordering and
refolding is no change, and a job it stored is ``applied``, not uncertain.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from undogate.adapters.dav.content import Instance
from undogate.config import parse_config
from undogate.errors import ConfigError, InvalidRequest
from undogate.jobs import ActionStatus, ChangeRequest, Job, JobState, Operation
from undogate.jsonvalue import JsonObject, dumps
from undogate.views import agent_receipt, job_receipt

from .caldav_servers import DavCollections
from .dav_world import (
    CONTACT,
    VCARD,
    dav_gateway,
    dav_resource,
    document_gateway,
    held,
    outside_edit,
    prepare,
    properties,
    seed,
    server_of,
)
from .davservers import run
from .worlds import OWNER, LocalGateway

# Long enough to be folded: icalendar folds it at 74 octets, Radicale (vobject) at 75.
NEW_NOTE = "Met at the fair, then again in 2026; the long way round, to force a fold here"


@pytest.fixture(params=["radicale", "xandikos"])
def dav(request: pytest.FixtureRequest) -> DavCollections:
    return server_of(request, request.param)


@pytest.fixture
def contact(
    dav: DavCollections, data_dir: Path
) -> Iterator[tuple[LocalGateway, DavCollections, str]]:
    with document_gateway(dav, data_dir, VCARD, "ada") as (gw, path):
        yield gw, dav, path


def test_email_and_note_change_and_undo_leaving_every_other_property(
    contact: tuple[LocalGateway, DavCollections, str],
) -> None:
    gw, dav, path = contact
    start, _ = held(dav, path)
    job = prepare(
        gw,
        ChangeRequest(
            "ada",
            set={
                "EMAIL": [
                    {"value": "ada@new.example", "params": {"TYPE": "work"}},
                    {"value": "ada@home.example", "params": {"TYPE": "home"}},
                ],
                "NOTE": NEW_NOTE,
            },
        ),
    )
    preview = gw.preview(OWNER, job.id, Operation.APPLY)
    assert preview.token is not None
    (sent,) = gw.confirm(OWNER, job.id, preview.token, dry_run=True).requests
    applied = gw.confirm(OWNER, job.id, preview.token).job
    assert applied.state is JobState.APPLIED  # not uncertain, whatever the server stored
    assert [a.status for a in applied.actions] == [ActionStatus.DONE]
    now, _ = held(dav, path)
    # Radicale stores its own serialization of what it was sent (other order, other
    # folds); Xandikos the bytes themselves. Both read back as the change.
    assert (now == sent["body"]) is (dav.name == "xandikos")
    after, before = properties(now), properties(start)
    assert [i.value for i in after["EMAIL"]] == ["ada@new.example", "ada@home.example"]
    assert after["NOTE"] == (Instance(NEW_NOTE),)
    assert {n: v for n, v in after.items() if n not in ("EMAIL", "NOTE")} == {
        n: v for n, v in before.items() if n not in ("EMAIL", "NOTE")
    }
    undone = run(gw, job.id, Operation.UNDO)
    assert undone.state is JobState.UNDONE
    assert properties(held(dav, path)[0]) == before


def test_remove_takes_every_instance_and_undo_puts_each_back(
    contact: tuple[LocalGateway, DavCollections, str],
) -> None:
    gw, dav, path = contact
    before = properties(held(dav, path)[0])
    assert len(before["EMAIL"]) == 2
    job = prepare(gw, ChangeRequest("ada", remove=["EMAIL"]))
    assert run(gw, job.id, Operation.APPLY).state is JobState.APPLIED
    assert "EMAIL" not in properties(held(dav, path)[0])
    assert run(gw, job.id, Operation.UNDO).state is JobState.UNDONE
    back = properties(held(dav, path)[0])
    assert sorted(i.key() for i in back["EMAIL"]) == sorted(i.key() for i in before["EMAIL"])


def _note_applied_then_edited(
    contact: tuple[LocalGateway, DavCollections, str], old: str, new: str
) -> Job:
    """A job that set the NOTE, applied; then another client rewrote ``old`` as ``new``."""
    gw, dav, path = contact
    job = prepare(gw, ChangeRequest("ada", set={"NOTE": "Call back on Monday"}))
    assert run(gw, job.id, Operation.APPLY).state is JobState.APPLIED
    outside_edit(dav, path, old, new)
    return job


def test_an_outside_edit_of_a_touched_property_refuses_the_undo_and_writes_nothing(
    contact: tuple[LocalGateway, DavCollections, str],
) -> None:
    gw, dav, path = contact
    job = _note_applied_then_edited(contact, "NOTE:Call back on Monday", "NOTE:Called back already")
    text, etag = held(dav, path)
    preview = gw.preview(OWNER, job.id, Operation.UNDO)
    assert preview.token is None and preview.blockers[0]["code"] == "conflict"
    assert held(dav, path) == (text, etag)  # nothing written
    assert properties(text)["NOTE"] == (Instance("Called back already"),)


def test_an_outside_edit_of_an_untouched_property_is_kept_by_the_undo(
    contact: tuple[LocalGateway, DavCollections, str],
) -> None:
    gw, dav, path = contact
    job = _note_applied_then_edited(contact, "TITLE:Countess", "TITLE:Mathematician")
    assert run(gw, job.id, Operation.UNDO).state is JobState.UNDONE
    back = properties(held(dav, path)[0])
    assert back["TITLE"] == (Instance("Mathematician"),)  # the outside value, kept
    assert back["NOTE"][0].value.startswith("A note long enough")  # ours, put back


def test_a_stale_card_refuses_the_apply_and_the_server_keeps_the_outside_edit(
    contact: tuple[LocalGateway, DavCollections, str],
) -> None:
    gw, dav, path = contact
    job = prepare(gw, ChangeRequest("ada", set={"NOTE": "Ours"}))
    preview = gw.preview(OWNER, job.id, Operation.APPLY)
    assert preview.token is not None
    outside_edit(dav, path, "TITLE:Countess", "TITLE:Mathematician")
    with pytest.raises(Exception, match="changed since the preview"):
        gw.confirm(OWNER, job.id, preview.token)
    assert properties(held(dav, path)[0])["TITLE"] == (Instance("Mathematician"),)


def test_what_a_change_may_name(contact: tuple[LocalGateway, DavCollections, str]) -> None:
    gw, _, _ = contact
    refusals: list[tuple[JsonObject, str]] = [
        ({"set": {"UID": "x"}}, "not a property"),
        ({"set": {"X-SECRET": "x"}}, "not a property"),
        ({"set": {"TITLE": "Countess"}}, "no-op"),
        ({"set": {"NOTE": "a"}, "remove": ["note"]}, "both set and removed"),
        ({"set": {"NOTE": []}}, "use remove"),
        ({"set": {"NOTE": {"value": "a", "extra": "x"}}}, "value and params"),
        ({"set": {"NOTE": "bell\x07"}}, "control character"),
        ({"set": {"EMAIL": {"value": "a@b", "params": {"TYPE": 'wo"rk'}}}}, "quote"),
        ({"text": "BEGIN:VCARD"}, "takes remove, set, not text"),
    ]
    for members, words in refusals:
        with pytest.raises(InvalidRequest, match=words):
            prepare(gw, ChangeRequest("ada", members))
    # A property named in any case is the property: the change is recorded in capitals.
    job = prepare(gw, ChangeRequest("ada", set={"note": "lower-case name"}))
    assert job.changes[0].fields == ("NOTE",)


def _config_of(data_dir: Path, kind: str, name: str, **settings: Any) -> dict[str, Any]:
    """A config of one resource of ``kind`` (never reached: config load only)."""
    entry = {
        "id": "ada",
        "agent_id": "account-assistant",
        "name": "Ada",
        "kind": kind,
        "url": f"https://dav.example.com/alice/contacts/{name}",
        "conditional_writes": True,
        **settings,
    }
    return {
        "server": {"data_dir": str(data_dir)},
        "resources": [entry],
        "agents": [{"id": "account-assistant", "tools": ["prepare_changes"]}],
    }


@pytest.mark.parametrize("name", ["UID", "RRULE", "ATTENDEE", "ORGANIZER", "METHOD", "VERSION"])
def test_a_property_that_reschedules_or_invites_is_refused_at_config_load(
    name: str, data_dir: Path
) -> None:
    config = _config_of(data_dir, "vcard", "ada.vcf", fields=["EMAIL", name])
    with pytest.raises(ConfigError, match=rf"resources\[0\]\.fields\[1\]: {name}"):
        parse_config(config)


def test_every_surface_shows_a_property_table_and_the_agent_only_names(
    contact: tuple[LocalGateway, DavCollections, str],
) -> None:
    gw, _, _ = contact
    job = prepare(gw, ChangeRequest("ada", set={"EMAIL": "ada@new.example"}, remove=["NOTE"]))
    receipt: Any = job_receipt(job)
    (change,) = receipt["changes"]
    rows = {r["field"]: r for r in change["rows"]}
    assert rows["EMAIL"]["before"] == [
        "ada@old.example (TYPE=work)",
        "ada@home.example (TYPE=home)",
    ]
    assert rows["EMAIL"]["after"] == "ada@new.example"
    assert rows["NOTE"]["after_present"] is False and rows["NOTE"]["changes"] is True
    told = agent_receipt(job)
    assert told["changes"] == [{"resource": "ada", "kind": "vcard", "fields": ["EMAIL", "NOTE"]}]
    assert "ada@" not in dumps(told)  # the agent's receipt holds no value


def test_a_repeated_parameter_is_one_parameter(dav: DavCollections, data_dir: Path) -> None:
    """vCard 3 writes ``type=INTERNET;type=WORK``; Radicale stores it merged
    (``TYPE=INTERNET,WORK``). Either way it is one parameter with both values: setting
    the same instance is a no-op, and nothing of it is lost when another one changes."""
    card = CONTACT.replace("EMAIL;TYPE=work:", "EMAIL;type=INTERNET;type=WORK:")
    path, _ = seed(dav, dav.addressbook, card, ".vcf")
    text, _ = held(dav, path)
    merged = "EMAIL;TYPE=INTERNET,WORK:ada@old.example" in text
    assert merged is (dav.name == "radicale")
    with dav_gateway(data_dir, dav_resource(dav, "ada", "vcard", path, [*VCARD.fields])) as gw:
        same = {"value": "ada@old.example", "params": {"TYPE": ["WORK", "INTERNET"]}}
        home = {"value": "ada@home.example", "params": {"TYPE": "home"}}
        with pytest.raises(InvalidRequest, match="no-op"):
            prepare(gw, ChangeRequest("ada", set={"EMAIL": [same, home]}))
        job = prepare(gw, ChangeRequest("ada", set={"EMAIL": [same]}))
        assert run(gw, job.id, Operation.APPLY).state is JobState.APPLIED
        assert run(gw, job.id, Operation.UNDO).state is JobState.UNDONE
    back = properties(held(dav, path)[0])["EMAIL"]
    assert sorted(back[0].param("TYPE")) == ["INTERNET", "WORK"]


@pytest.mark.parametrize(
    ("identity", "where", "words"),
    [
        (
            [{"field": "EMAIL", "evidence": "fuzzy"}],
            "identity[0].evidence",
            "not identity evidence",
        ),
        ([{"field": "UID", "evidence": "email"}], "identity[0].evidence", "UID is evidence only"),
        ([{"field": "NICKNAME", "evidence": "exact"}], "identity[0].field", "neither UID nor"),
        (
            [{"field": "EMAIL", "evidence": "email"}, {"field": "EMAIL", "evidence": "exact"}],
            "identity[1].field",
            "named twice",
        ),
    ],
)
def test_an_address_book_s_identity_is_refused_at_config_load_unless_exact(
    identity: list[dict[str, str]], where: str, words: str, data_dir: Path
) -> None:
    config = _config_of(
        data_dir, "vcard_collection", "", fields=["EMAIL", "NOTE"], identity=identity
    )
    with pytest.raises(ConfigError) as refused:
        parse_config(config)
    assert where in str(refused.value.details) and words in str(refused.value), refused.value
    config["resources"][0]["identity"] = [
        {"field": "UID", "evidence": "exact"},
        {"field": "EMAIL", "evidence": "email"},
    ]
    assert parse_config(config).resource("ada") is not None


def test_a_field_names_a_property_never_a_group(data_dir: Path) -> None:
    """``fields`` allow a property in every group (``EMAIL`` allows ``item1.EMAIL``):
    a group's name there is refused, saying so."""
    config = _config_of(data_dir, "vcard", "ada.vcf", fields=["NOTE", "item1.EMAIL"])
    with pytest.raises(ConfigError, match=r"fields\[1\]: 'item1\.EMAIL' names a group"):
        parse_config(config)
