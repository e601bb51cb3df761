"""What an operator's surfaces give away, attacked from outside: a real ``undogate serve
--log-format json`` beside another one on the same SQLite ledger, fed failing requests
that carry keys in every place a client could put one (the Authorization header, the
path, the query, a body's fields, the sign-in form), and ``--metrics-bind`` given
addresses that are not loopback. No key may reach a log line; the scrape is never
served off loopback without a key."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import httpx
import pytest

from .processes import stop
from .serving import cli, free_port, serve_log, serving


def _secret_parts(key: str) -> list[str]:
    """What of a key must never be written: the key, and the part of it after the
    prefix and the 12 characters its credential's id shows (``op_`` + key[4:16])."""
    return [key, key[16:]]


def _base64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_json_logs_never_carry_a_key_wherever_a_client_puts_one(
    served: dict[str, object],
) -> None:
    config, env = Path(str(served["config"])), dict(served["env"])  # type: ignore[call-overload]
    operator, agent = str(served["operator"]), str(served["agent"])
    # A master key of the operator's own choosing: not shaped like the keys undogate makes.
    master = env["UNDOGATE_MASTER_KEY"] = "a-master-key-of-my-own-choosing-" + "7" * 16
    with serving(config, env, "--log-format", "json") as (url, proc):
        with httpx.Client(base_url=url, timeout=30) as client:

            def bearer(key: str) -> dict[str, str]:
                return {"Authorization": f"Bearer {key}"}

            answers = [
                # Keys in the Authorization header, refused for who they are.
                client.get("/api/v1/resources", headers=bearer(operator)),  # not an agent
                client.get("/metrics", headers=bearer(agent)),  # not the operator
                client.get("/api/v1/admin/keys", headers=bearer(agent)),
                client.get("/api/v1/inbox", headers=bearer(operator + "x")),  # unknown
                client.get("/api/v1/inbox", headers=bearer(agent[:-1])),
                client.get(
                    "/api/v1/inbox",
                    headers={"Authorization": "Basic " + _base64(f"user:{operator}")},
                ),
                client.get("/api/v1/inbox", headers={"Authorization": f"Token {operator}"}),
                client.get("/api/v1/inbox", headers={"Authorization": f"Bearer {operator} x"}),
                # Keys where a name or a value goes: the path, the query, a body's fields.
                client.get(f"/api/v1/jobs/{agent}", headers=bearer(operator)),
                client.get(f"/api/v1/jobs/{master}", headers=bearer(operator)),
                client.get("/api/v1/resources", headers=bearer(master)),
                client.get(f"/api/v1/inbox?after={agent}", headers=bearer(operator)),
                client.get(f"/api/v1/inbox?since={agent}", headers=bearer(operator)),
                client.get(f"/api/v1/inbox?agent={agent}", headers=bearer(operator)),
                client.post(
                    "/api/v1/jobs",
                    json={"summary": "s", "changes": [{"resource": operator, "set": {}}]},
                    headers=bearer(agent),
                ),
                client.post(
                    "/api/v1/jobs",
                    json={
                        "summary": "s",
                        "changes": [{"resource": "customer", "set": {operator: "x"}}],
                    },
                    headers=bearer(agent),
                ),
                client.post("/api/v1/jobs", json={operator: 1}, headers=bearer(agent)),
                client.post(
                    f"/api/v1/jobs/job_{agent}/confirm",
                    json={"preview_token": operator},
                    headers=bearer(operator),
                ),
                client.post(
                    "/api/v1/admin/keys/" + agent + "/revoke", json={}, headers=bearer(operator)
                ),
                client.post("/signin", data={"key": agent, "csrf": operator}),
                client.post(
                    "/mcp",
                    json={"jsonrpc": "2.0", "id": 1, "method": "x"},
                    headers=bearer(operator),
                ),
            ]
            refused = sum(a.status_code >= 400 for a in answers)
            # What the refusals were counted under: codes, never what the client sent.
            scraped = client.get("/metrics", headers=bearer(operator))
            assert scraped.status_code == 200, scraped.text
        stop(proc)  # everything it wrote, to its last line
        said = serve_log(proc)
    lines = said.splitlines()
    refusals = [json.loads(line) for line in lines if '"undogate.refusals"' in line]
    assert refused >= 15 and len(refusals) >= 10, said  # what is checked was logged
    assert all(isinstance(json.loads(line), dict) for line in lines)  # one object a line
    secrets = [master, *(part for key in (operator, agent) for part in _secret_parts(key))]
    carrying = [line for line in lines if any(part in line for part in secrets)]
    assert carrying == [], "\n".join(carrying)
    labels = [line for line in scraped.text.splitlines() if "{" in line]
    assert any('outcome="not_found"' in line for line in labels), scraped.text
    for label in labels:
        assert not any(part in label for part in secrets), label
        # no owner, credential, job or resource: the lease's holder is a pid and a host
        assert not any(word in label for word in ("op_", "at_", "job_", "http", "customer"))
    assert "bearer ug" not in said.lower()


@pytest.mark.parametrize(
    "address",
    [
        "localhost:{port}",  # a name: what it resolves to is not the flag's to trust
        "ip6-localhost:{port}",
        "example.com:{port}",
        "0.0.0.0:{port}",
        "[::]:{port}",
        "[::ffff:127.0.0.1]:{port}",  # loopback only as an IPv4-mapped v6 address
        "127.0.0.1.nip.io:{port}",  # a name that spells a loopback address
        "2130706433:{port}",  # 127.0.0.1 as one number: inet_aton would take it
        "0x7f.1:{port}",
        "127.1:{port}",
    ],
)
def test_the_metrics_bind_refuses_every_address_that_is_not_a_loopback_ip(
    served: dict[str, object], address: str
) -> None:
    """Anything but a literal loopback IP is refused before anything is bound: a host
    name (which DNS, or /etc/hosts, may point anywhere) and the spellings of 127.0.0.1
    that the C resolver takes but an address parser should not."""
    bind = address.format(port=free_port())
    refused = cli(
        "serve", "--config", str(served["config"]), "--port", str(free_port()),
        "--metrics-bind", bind,
    )  # fmt: skip
    assert refused.returncode == 2, refused.stderr
    assert "error [invalid_request]: --metrics-bind" in refused.stderr


def test_the_api_port_never_takes_a_request_for_the_metrics_bind_by_what_the_client_says(
    served: dict[str, object],
) -> None:
    """The scrape needs no key on its own loopback socket only: a request on the API's
    port that names that socket (Host, the forwarding headers) still needs the key."""
    config, env = Path(str(served["config"])), dict(served["env"])  # type: ignore[call-overload]
    bind = f"127.0.0.1:{free_port()}"
    with serving(config, env, "--metrics-bind", bind) as (url, _):
        assert httpx.get(f"http://{bind}/metrics", timeout=10).status_code == 200
        for headers in (
            {"Host": bind},
            {"X-Forwarded-Host": bind, "X-Forwarded-For": "127.0.0.1"},
            {"Forwarded": f"for=127.0.0.1;host={bind}", "X-Forwarded-Port": bind[-5:]},
        ):
            answer = httpx.get(f"{url}/metrics", headers=headers, timeout=10)
            assert answer.status_code == 401, (headers, answer.text)
            assert "undogate_prepares" not in answer.text
