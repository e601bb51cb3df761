"""RFC 8288 ``Link`` fields, parsed: relation types space-separated and case-insensitive,
parameters quoted or not, whitespace around ``;`` and ``=``, and a value that is not a list
of links refused whole. Examples from the RFC, then properties over generated fields."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from undogate.net.link_header import Link, parse_links


@pytest.mark.parametrize(
    ("field", "relations"),
    [
        ('<https://x.example/p2>; rel="next"', [{"next"}]),
        ('<https://x.example/p2>; rel="Next"', [{"next"}]),
        ('<https://x.example/p2>; rel="next last"', [{"next", "last"}]),
        ('<https://x.example/p2>; rel = "next"', [{"next"}]),
        ("<https://x.example/p2>;rel=next", [{"next"}]),
        ("<https://x.example/p2> ;\trel=NEXT", [{"next"}]),
        ('<a>; title="a, b; c"; rel="next"', [{"next"}]),
        ('<a>; rel="prev", <b>; rel="next"', [{"prev"}, {"next"}]),
        ('<a>; rel="prev" , , <b>;rel=next', [{"prev"}, {"next"}]),
        ('<a>; rel="next"; rel="prev"', [{"next"}]),  # only the first rel counts
        ('<a>; rel="prev"; rel="next"', [{"prev"}]),
        ('<https://x.example/next>; rel="last"', [{"last"}]),  # "next" in the URL only
        ('<a>; title="next"', [set()]),
        ('<a>; rel="nextish"', [{"nextish"}]),
        ('<a>; rel="http://example.net/next"', [{"http://example.net/next"}]),
        ('<a>; rel="\\n\\ext"', [{"next"}]),  # a quoted-pair is the character itself
        ("", []),
        (" , ", []),
    ],
)
def test_relations_are_read_as_the_rfc_says(field: str, relations: list[set[str]]) -> None:
    assert [set(link.relations) for link in parse_links([field])] == relations


def test_each_field_line_is_its_own_list() -> None:
    links = parse_links(['<p1>; rel="prev"', '<p3>; rel="next"'])
    assert links == [Link("p1", frozenset({"prev"})), Link("p3", frozenset({"next"}))]


@pytest.mark.parametrize(
    "field",
    [
        'rel="next"',  # no target
        '<a; rel="next"',  # unclosed target
        '<a>; rel="next',  # unclosed quote
        '<a> rel="next"',  # no ';' before a parameter
        '<a>; rel="prev" <b>; rel="next"',  # no ',' between links
        '<a>; rel="prev", garbage, <b>; rel="next"',
    ],
)
def test_a_field_that_is_not_a_list_of_links_is_refused_whole(field: str) -> None:
    with pytest.raises(ValueError, match="Link"):
        parse_links([field])


# -- properties -----------------------------------------------------------------------------

_TOKEN = st.text(string.ascii_letters + string.digits + "-.", min_size=1, max_size=12)
_OWS = st.sampled_from(["", " ", "\t", "  "])
_TARGET = st.text(st.characters(codec="ascii", exclude_characters=">\r\n"), max_size=30)
_QUOTED_TEXT = st.text(st.characters(codec="ascii", exclude_characters="\r\n"), max_size=20)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@st.composite
def _links(draw: st.DrawFn) -> tuple[str, Link]:
    """One link-value as a server might spell it, and what it means."""
    target = draw(_TARGET)
    relations = draw(st.lists(_TOKEN, max_size=3))
    spelled = [draw(st.sampled_from([r, r.upper(), r.title()])) for r in relations]
    params: list[str] = []
    for _ in range(draw(st.integers(0, 2))):  # other parameters, before or after rel
        name = draw(_TOKEN.filter(lambda n: n.lower() != "rel"))
        value = _quote(draw(_QUOTED_TEXT)) if draw(st.booleans()) else draw(_TOKEN)
        params.append(f"{name}{draw(_OWS)}={draw(_OWS)}{value}")
    if relations:
        joined = " ".join(spelled)
        quoted = len(relations) > 1 or draw(st.booleans())
        rel = _quote(joined) if quoted else joined
        params.insert(draw(st.integers(0, len(params))), f"rel{draw(_OWS)}={draw(_OWS)}{rel}")
    text = f"<{target}>" + "".join(f"{draw(_OWS)};{draw(_OWS)}{p}" for p in params)
    return text, Link(target, frozenset(r.lower() for r in relations))


@given(st.lists(_links(), max_size=4), _OWS)
def test_every_generated_field_reads_back_as_what_it_says(
    links: list[tuple[str, Link]], ows: str
) -> None:
    field = f"{ows},{ows}".join(text for text, _ in links)
    assert parse_links([field]) == [link for _, link in links]


@given(st.lists(_links(), min_size=1, max_size=4))
def test_a_next_link_is_found_wherever_it_stands(links: list[tuple[str, Link]]) -> None:
    field = ", ".join(text for text, _ in links)
    announced = any("next" in link.relations for link in parse_links([field]))
    assert announced == any("next" in link.relations for _, link in links)


@given(st.text(max_size=80))
def test_any_text_parses_or_is_refused_with_value_error(text: str) -> None:
    try:
        links = parse_links([text])
    except ValueError:
        return
    assert all(isinstance(link.target, str) for link in links)
