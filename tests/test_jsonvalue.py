"""Lossless JSON and RFC 9110 entity tags."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from undogate.jsonvalue import (
    JsonError,
    JsonNumber,
    canonical_bytes,
    dumps,
    loads,
    loads_object,
    resolve_record,
)
from undogate.net.etag import ETag, if_match_satisfied, parse_etag, parse_etag_list


def test_numbers_keep_their_exact_text() -> None:
    text = (
        b'{"big":123456789012345678901234567890,'
        b'"d":0.1000000000000000055511151231257827,"e":1E+400}'
    )
    value = loads_object(text)
    assert dumps(value, sort_keys=False).encode() == text
    assert value["big"] == JsonNumber("123456789012345678901234567890")
    assert JsonNumber("1.0") == JsonNumber("1")  # value equality, as RFC 6902 test wants
    assert JsonNumber("1") != True  # noqa: E712 - a number is never a boolean


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"a":1,"a":2}', "duplicate_key"),
        (b'{"a":"\xff"}', "invalid_utf8"),
        (b'{"a":NaN}', "malformed"),
        (b'{"a":', "malformed"),
        (b'{"a":"\\ud800"}', "malformed"),
        (b"[1,2]", "not_object"),
    ],
)
def test_refusals(data: bytes, reason: str) -> None:
    with pytest.raises(JsonError) as info:
        loads_object(data)
    assert info.value.reason == reason


def test_canonical_form_is_sorted_and_compact() -> None:
    assert (
        canonical_bytes(loads('{ "b": [1, 2.50], "a": "é" }')) == '{"a":"é","b":[1,2.50]}'.encode()
    )


def test_record_pointer() -> None:
    doc = loads('{"data": {"a/b": {"x": 1}}}')
    assert resolve_record(doc, "/data/a~1b") == {"x": JsonNumber("1")}
    with pytest.raises(JsonError):
        resolve_record(doc, "/missing")


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.text(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.decimals(allow_nan=False, allow_infinity=False).map(lambda d: f"{d:f}"),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_round_trip_is_byte_exact(value: object) -> None:
    def render(v: object) -> str:
        if (
            isinstance(v, str)
            and (v[:1].isdigit() or v[:1] == "-")
            and v.replace("-", "").replace(".", "").isdigit()
        ):
            return v  # a decimal rendered as number text
        if isinstance(v, list):
            return "[" + ",".join(render(i) for i in v) + "]"
        if isinstance(v, dict):
            return (
                "{"
                + ",".join(
                    json.dumps(k, ensure_ascii=False) + ":" + render(i) for k, i in v.items()
                )
                + "}"
            )
        return json.dumps(v, ensure_ascii=False)

    text = render(value)
    try:
        parsed = loads(text)
    except JsonError:
        return  # lone surrogates from st.text() are refused by design
    assert dumps(parsed, sort_keys=False) == text


def test_etag_parsing_and_strong_comparison() -> None:
    strong = parse_etag('"abc"')
    weak = parse_etag('W/"abc"')
    assert strong == ETag("abc") and weak.weak
    assert strong.strong_equals(parse_etag('"abc"'))
    assert not strong.strong_equals(weak)
    assert not weak.strong_equals(weak)
    for bad in ("abc", '"a"b"', 'w/"x"', '"x', ""):
        with pytest.raises(ValueError, match="malformed"):
            parse_etag(bad)
    assert parse_etag_list('"a", W/"b" ,"c"') == [ETag("a"), ETag("b", True), ETag("c")]
    assert parse_etag_list("*") is None
    assert if_match_satisfied('"x", "abc"', strong)
    assert not if_match_satisfied('W/"abc"', strong)
    assert if_match_satisfied("*", strong) and not if_match_satisfied("*", None)
    assert not if_match_satisfied("garbage", strong)


@given(
    json_values,
    st.booleans(),
    st.sampled_from([None, 0, 2]),
    st.sampled_from([(",", ":"), (", ", ": ")]),
)
def test_the_canonical_form_is_never_longer_than_its_source(
    value: object, ascii_only: bool, indent: int | None, separators: tuple[str, str]
) -> None:
    # The record adapter measures a document only when its body is over the size limit.
    raw = json.dumps(value, ensure_ascii=ascii_only, indent=indent, separators=separators)
    source = raw.encode("utf-8", "surrogatepass")
    try:
        parsed = loads(source)
    except JsonError:
        return  # lone surrogates are refused by design
    assert len(canonical_bytes(parsed)) <= len(source)


@pytest.mark.parametrize(
    "source",
    [b'"\\/"', b'"\\u0041\\u00e9\\ud83d\\ude00"', b'"\\b\\f\\n\\r\\t\\u0001\\u001f"', b'"\x7f"'],
)
def test_escapes_never_grow_in_the_canonical_form(source: bytes) -> None:
    assert len(canonical_bytes(loads(source))) <= len(source)
