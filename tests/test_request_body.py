"""Every client reads the answer to a body it should not have sent: a real
``undogate serve`` and urllib (which sends the whole body before it reads a byte), so a
server that answered and closed with the body unread would show up as a reset."""

from __future__ import annotations

import itertools
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from undogate.api.request_body import MAX_BODY_BYTES

TRIES = 5
MIB = 1024 * 1024
# 2 MiB is the size first reported; 8 MiB does not fit the socket buffers on loopback, so
# a server that closes with the body unread resets every try (within DRAIN_MAX_BYTES).
SIZES = [2 * MIB, 8 * MIB]


def _post(url: str, key: str, body: bytes | Iterator[bytes]) -> tuple[int, Any]:
    """POST with urllib; the status and the JSON answer (a reset raises)."""
    headers = {
        "Authorization": f"Bearer {key}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    if not isinstance(body, bytes):
        headers["Transfer-Encoding"] = "chunked"  # urllib then sends the iterator chunked
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - 127.0.0.1
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as answer:
        return answer.code, json.loads(answer.read())


def _chunks(size: int) -> Iterator[bytes]:
    for _ in range(size // (64 * 1024)):
        yield b" " * (64 * 1024)


@pytest.mark.parametrize("path", ["/api/v1/jobs", "/mcp"])
def test_every_client_reads_the_413_of_a_body_over_the_limit(
    served: dict[str, Any], path: str
) -> None:
    url = f"{served['url']}{path}"
    for size, chunked in itertools.product(SIZES, (False, True)):
        for _ in range(TRIES):
            body = _chunks(size) if chunked else b" " * size
            status, answer = _post(url, str(served["agent"]), body)
            assert status == 413, (size, chunked)
            assert answer == {
                "error": {
                    "code": "payload_too_large",
                    "message": f"the body is larger than {MAX_BODY_BYTES} bytes.",
                    "details": {"limit": MAX_BODY_BYTES},
                }
            }


@pytest.mark.parametrize("path", ["/api/v1/jobs", "/mcp"])
def test_a_refusal_before_the_body_is_read_reaches_the_client_too(
    served: dict[str, Any], path: str
) -> None:
    for _ in range(TRIES):
        status, answer = _post(f"{served['url']}{path}", "uga_not-a-key", b" " * SIZES[-1])
        assert status == 401
        assert answer["error"]["code"] == "unauthorized"
