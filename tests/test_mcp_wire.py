"""The agent tools read their arguments exactly as ``POST /api/v1/jobs`` reads a body:
the same table of bodies goes through the HTTP API and through the SDK's real MCP
client (streamable HTTP and stdio), and both surfaces store the same exact values or
refuse with the same code and reason.

Every test runs against a real ``undogate serve`` subprocess.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import pytest

from undogate.errors import InvalidRequest
from undogate.jsonvalue import dumps, loads
from undogate.mcp.wire import InboundMessage, WireRefusal, read_message

from .raw_stdin import inject_raw, raw
from .serving import base_env
from .worlds import ERROR_PREFIX, Connect, ServedWorld, run

CHANGE = {"resource": "customer", "set": {"status": "customer"}}


def _set(**fields: Any) -> dict[str, Any]:
    return {"summary": "Set exact values", "changes": [{"resource": "customer", "set": fields}]}


@dataclass(frozen=True)
class Row:
    name: str
    arguments: dict[str, Any]  # the tool's arguments, which are also the API's body
    stored: str | None = None  # a stored value's exact text, or
    code: str | None = None  # the refusal's code,
    reason: str | None = None  # and its reason


TABLE = [
    Row("a long decimal", _set(ratio=raw("0.1000000000000000000000000000000001")),
        stored='"ratio":0.1000000000000000000000000000000001'),
    Row("trailing zeros", _set(ratio=raw("1.50")), stored='"ratio":1.50'),
    Row("a big integer", _set(balance=raw("98765432109876543210987654321098765")),
        stored='"balance":98765432109876543210987654321098765'),
    Row("an exponent past float range", _set(balance=raw("1e400")), stored='"balance":1e400'),
    Row("a negative exponent", _set(ratio=raw("-2.50E-7")), stored='"ratio":-2.50E-7'),
    Row("a duplicate key at the top level",
        {"summary": raw('"first", "summary": "second"'), "changes": [CHANGE]},
        code="invalid_request", reason="duplicate_key"),
    Row("a duplicate key in a change",
        {"summary": "x", "changes": [{"resource": "customer",
                                      "set": raw('{"status": "a", "status": "b"}')}]},
        code="invalid_request", reason="duplicate_key"),
    Row("invalid UTF-8 in a value", _set(notes=raw(b'"caf\xe9"')),
        code="invalid_request", reason="invalid_utf8"),
    Row("an unpaired surrogate", _set(notes=raw('"\\ud800"')),
        code="invalid_request", reason="malformed"),
    Row("NaN", _set(balance=raw("NaN")), code="invalid_request", reason="malformed"),
    Row("an unknown member", {"summary": "x", "changes": [{**CHANGE, "colour": "red"}]},
        code="invalid_request"),
    Row("no summary", {"changes": [CHANGE]}, code="invalid_request"),
    Row("changes that are not a list", {"summary": "x", "changes": "all of them"},
        code="invalid_request"),
]  # fmt: skip


def _api_outcome(world: ServedWorld, arguments: dict[str, Any]) -> tuple[str, ...]:
    response = world.post(
        "/api/v1/jobs", inject_raw(json.dumps(arguments).encode()), "account-assistant"
    )
    if response.status_code < 300:
        return ("stored", _stored_after(world, response.json()["job_id"]))
    error = response.json()["error"]
    return ("refused", error["code"], error["details"].get("reason", ""))


def _mcp_outcome(world: ServedWorld, result: Any) -> tuple[str, ...]:
    text = getattr(result.content[0], "text", "")
    if not result.is_error:
        return ("stored", _stored_after(world, result.structured_content["job_id"]))
    match = ERROR_PREFIX.match(text)
    assert match, text
    _, _, details = text.partition(" Details: ")
    return ("refused", match.group(1), json.loads(details or "{}").get("reason", ""))


def _stored_after(world: ServedWorld, job_id: str) -> str:
    """The job's stored after-values, read losslessly, as exact text."""
    response = world.get(f"/api/v1/jobs/{job_id}")
    job = loads(response.content)
    assert isinstance(job, dict) and isinstance(job["changes"], list)
    change = job["changes"][0]
    assert isinstance(change, dict)
    return dumps(change["after"])


def test_the_tools_parse_arguments_exactly_like_the_http_api(
    connect: Connect, world: ServedWorld
) -> None:
    outcomes: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = []

    async def scenario() -> None:
        async with connect("account-assistant", raw=True) as session:
            for row in TABLE:
                result = await session.call("prepare_changes", **row.arguments)
                outcomes.append(
                    (row.name, _api_outcome(world, row.arguments), _mcp_outcome(world, result))
                )

    run(scenario)
    for (name, api, mcp), row in zip(outcomes, TABLE, strict=True):
        assert mcp == api, name
        if row.stored is not None:
            assert api[0] == "stored" and row.stored in api[1], (name, api)
        else:
            assert api[:2] == ("refused", row.code), (name, api)
            assert row.reason is None or api[2] == row.reason, (name, api)


# -- messages that are not tool calls -----------------------------------------------------------

NOT_JSON = b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {'
DUPLICATE_ID = b'{"jsonrpc": "2.0", "id": 7, "id": 8, "method": "ping"}'
BAD_UTF8_PING = b'{"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {"n": "\xff"}}'
WIRE_CASES = [  # the message, the JSON-RPC error code, the API's reason, the id answered
    (NOT_JSON, -32700, "malformed", None),
    (DUPLICATE_ID, -32600, "duplicate_key", None),
    (BAD_UTF8_PING, -32600, "invalid_utf8", 7),
]


def _api_refusal(world: ServedWorld, body: bytes) -> tuple[str, str]:
    error = world.post("/api/v1/jobs", body, "account-assistant").json()["error"]
    return error["code"], error["details"]["reason"]


def test_a_message_that_is_not_acceptable_json_gets_the_apis_code_over_http(
    world: ServedWorld,
) -> None:
    for body, rpc_code, reason, answered_id in WIRE_CASES:
        response = world.post("/mcp", body, "account-assistant")
        assert response.status_code == 400, response.text
        answer = response.json()
        assert answer["id"] == answered_id
        assert answer["error"]["code"] == rpc_code
        data = answer["error"]["data"]
        assert (
            (data["code"], data["reason"])
            == _api_refusal(world, body)
            == ("invalid_request", reason)
        )


def test_a_line_that_is_not_acceptable_json_gets_the_apis_code_over_stdio(
    world: ServedWorld,
) -> None:
    lines = b"".join(body + b"\n" for body, *_ in WIRE_CASES)
    env = {
        **base_env(),
        "UNDOGATE_URL": world.url,
        "UNDOGATE_AGENT_TOKEN": world.keys["account-assistant"],
    }
    done = subprocess.run(
        [sys.executable, "-m", "undogate.mcp"],
        input=lines + b"x" * (1024 * 1024 + 1) + b"\n",
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(answers) == len(WIRE_CASES) + 1
    for (body, rpc_code, reason, answered_id), answer in zip(WIRE_CASES, answers, strict=False):
        assert answer["id"] == answered_id
        assert answer["error"]["code"] == rpc_code
        data = answer["error"]["data"]
        assert (
            (data["code"], data["reason"])
            == _api_refusal(world, body)
            == ("invalid_request", reason)
        )
    too_long = answers[-1]["error"]["data"]
    assert too_long == {"code": "payload_too_large", "limit": 1024 * 1024}


# -- the rule itself ---------------------------------------------------------------------------


def test_a_tool_call_reaches_the_sdk_without_its_arguments() -> None:
    raw_call = (
        b'{"jsonrpc":"2.0","id":3,"method":"tools/call",'
        b'"params":{"name":"prepare_changes","arguments":{"n":1.50,"big":1e400}}}'
    )
    message = read_message(raw_call)
    assert message.tool_call and message.error is None
    assert dumps(message.tool_arguments()) == '{"big":1e400,"n":1.50}'
    assert json.loads(message.sdk_bytes)["params"] == {"name": "prepare_changes", "arguments": {}}


def test_other_messages_reach_the_sdk_byte_for_byte() -> None:
    ping = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": 1.50}}'
    assert read_message(ping) == InboundMessage(ping, "ping")


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [(b'{"a": 1, "a": 2}', "duplicate_key"), (b'"\xff"', "invalid_utf8"), (b"[1]", None)],
)
def test_a_tool_call_with_unacceptable_arguments_is_refused_by_the_tool(
    arguments: bytes, reason: str | None
) -> None:
    raw_call = b'{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"t","arguments":'
    message = read_message(raw_call + arguments + b"}}")
    assert message.tool_call
    with pytest.raises(InvalidRequest) as refused:
        message.tool_arguments()
    assert refused.value.details.get("reason") == reason


def test_json_that_is_not_a_message_never_reaches_the_sdk() -> None:
    with pytest.raises(WireRefusal) as refused:
        read_message(b"\xff\xfe")
    assert refused.value.request_id is None and refused.value.rpc_code == -32700
