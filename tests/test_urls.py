"""RFC 3986 normalisation: spellings of one object compare equal, other objects do not."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from undogate.net.urls import dot_segment, normalised_url, remove_dot_segments


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        # RFC 3986 §5.2.4's own examples, then the edges of each rule
        ("/a/b/c/./../../g", "/a/g"),
        ("mid/content=5/../6", "mid/6"),
        ("/records/./r1", "/records/r1"),
        ("/records/x/../r1", "/records/r1"),
        ("/records/r1/.", "/records/r1/"),
        ("/records/r1/..", "/records/"),
        ("/../../r1", "/r1"),
        ("../r1", "r1"),
        ("./r1", "r1"),
        (".", ""),
        ("..", ""),
        ("/", "/"),
        ("/records/..r1/.r2/r3.", "/records/..r1/.r2/r3."),
    ],
)
def test_remove_dot_segments(path: str, expected: str) -> None:
    assert remove_dot_segments(path) == expected


SAME = [
    # (as first written, a second spelling of the same object)
    ("https://records.example.com/records/r1", "https://records.example.com/records/./r1"),
    ("https://records.example.com/records/r1", "https://records.example.com/records/x/../r1"),
    ("https://records.example.com/records/r1", "https://records.example.com/records/%2e/r1"),
    ("https://records.example.com/records/r1", "https://records.example.com/a/%2E%2E/records/r1"),
    ("https://records.example.com/records/r1", "HTTPS://Records.Example.COM/records/r1"),
    ("https://records.example.com/records/r1", "https://records.example.com:443/records/r1"),
    ("https://records.example.com/records/r1", "https://records.example.com:0443/records/r1"),
    ("https://records.example.com/records/r1", "https://records.example.com/%72ecords/%72%31"),
    ("https://records.example.com/records/~r1", "https://records.example.com/records/%7er1"),
    ("https://records.example.com/a%2Fb", "https://records.example.com/a%2fb"),
    ("https://records.example.com/caf%C3%A9", "https://records.example.com/café"),
    ("https://records.example.com/a%20b", "https://records.example.com/a%20b"),
    ("https://records.example.com/100%25", "https://records.example.com/100%"),
    ("https://xn--bcher-kva.example/r1", "https://Bücher.example/r1"),
    ("http://127.0.0.1:80/r1", "http://127.0.0.1/r1"),
    ("http://[::1]:8080/r1", "http://[0:0:0:0:0:0:0:1]:8080/r1"),
    ("https://records.example.com/", "https://records.example.com"),
]

DIFFERENT = [
    ("https://records.example.com/records/r1", "https://records.example.com/records/R1"),
    ("https://records.example.com/records/r1", "https://records.example.com/records/r1/"),
    ("https://records.example.com/records/r1", "https://records.example.com/records//r1"),
    ("https://records.example.com/a/b", "https://records.example.com/a%2Fb"),  # reserved
    ("https://records.example.com/a;b", "https://records.example.com/a%3Bb"),  # reserved
    ("https://records.example.com/r1", "https://records.example.com:8443/r1"),
    ("https://records.example.com/r1", "https://other.example.com/r1"),
    ("https://records.example.com/r1", "http://records.example.com/r1"),
    ("http://127.0.0.1:8080/r1", "http://127.0.0.2:8080/r1"),
]


@pytest.mark.parametrize(("first", "second"), SAME)
def test_spellings_of_one_object_normalise_alike(first: str, second: str) -> None:
    assert normalised_url(second) == normalised_url(first)


@pytest.mark.parametrize(("first", "second"), DIFFERENT)
def test_different_objects_stay_different(first: str, second: str) -> None:
    assert normalised_url(second) != normalised_url(first)


def test_the_normal_form_is_the_rfc_one() -> None:
    assert (
        normalised_url("HTTPS://user@Records.Example.COM:443/%7euser/./a/../r%2f1#top")
        == "https://records.example.com/~user/r%2F1"
    )
    assert normalised_url("http://127.0.0.1:8080") == "http://127.0.0.1:8080/"


@pytest.mark.parametrize(
    ("path", "segment"),
    [
        ("/records/./r1", "."),
        ("/records/x/../r1", ".."),
        ("/records/%2e/r1", "%2e"),
        ("/records/%2E%2e/r1", "%2E%2e"),
        ("/records/.%2E/r1", ".%2E"),
        ("/records/..;jsessionid=1/r1", "..;jsessionid=1"),
        ("/records/r1/.", "."),
        ("/records/r1/..", ".."),
        ("/records/r1", None),
        ("/records/..r1/.well-known/r1.", None),
        ("/records/...", None),
    ],
)
def test_dot_segments_are_found_as_written_and_percent_encoded(
    path: str, segment: str | None
) -> None:
    assert dot_segment(path) == segment


_PATH_CHARS = st.sampled_from(
    [*"abcXYZ019-._~!$&'()*+,;=:@/%?é中 \"<>{}|\\^`[]", "%2e", "%7E", "%2F", "%C3%A9"]
)


@given(st.lists(_PATH_CHARS, max_size=30).map("".join))
def test_normalising_is_idempotent_and_agrees_with_what_is_sent(path: str) -> None:
    url = "https://records.example.com/" + path.replace("?", "")
    once = normalised_url(url)
    assert normalised_url(once) == once
    # httpx (what PinnedClient sends) escapes what must be escaped and removes plain dot
    # segments; the wire form names the same object as the written one.
    assert normalised_url(str(httpx.URL(url))) == once
