"""Config: every problem reported at once with its YAML path, never a traceback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from undogate.config import load_config, parse_config
from undogate.errors import ConfigError
from undogate.resources import Limits
from undogate.testing.launcher import run

GOOD = """
server:
  data_dir: ./state
resources:
  - id: customer
    agent_id: account-assistant
    name: Customer record
    kind: json_record
    url: https://records.example.com/customers/123
    token_env: CUSTOMER_SERVICE_TOKEN
    fields: [status, owner]
    conditional_writes: true
agents:
  - id: account-assistant
    tools: [list_resources, prepare_changes]
"""

BAD = """
server:
  http_timeout_s: -3
  colour: blue
resources:
  - id: customer
    agent_id: ghost
    name: Customer
    kind: json_record
    url: ftp://user:pw@records.example.com/c/1?x=1#frag
    fields: []
  - id: customer
    agent_id: account-assistant
    name: Notes
    kind: webdav_text
    url: http://records.example.com/notes.md
    fields: [status]
    record_pointer: data
  - id: third
    agent_id: account-assistant
    kind: spreadsheet
agents:
  - id: account-assistant
    tools: [list_resources, "*", send_email]
"""


def test_good_config_loads_with_relative_data_dir(tmp_path: Path) -> None:
    path = tmp_path / "undogate.yaml"
    path.write_text(GOOD)
    cfg = load_config(path)
    assert cfg.server.data_dir == tmp_path / "state"
    assert cfg.agent_tools("account-assistant") == ("list_resources", "prepare_changes")
    assert cfg.resource("customer") is not None
    assert cfg.server.operation_timeout_s == 45


def test_every_problem_is_reported_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(BAD)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    paths = {p for p, _ in info.value.problems}
    expected = {
        "server.http_timeout_s",
        "server.colour",
        "resources[0].agent_id",
        "resources[0].url",
        "resources[0].fields",
        "resources[1].id",
        "resources[1].url",
        "resources[1].fields",
        "resources[1].record_pointer",
        "resources[2].name",
        "resources[2].kind",
        "resources[2].url",
        "agents[0].tools[2]",
    }
    assert expected <= paths, expected - paths
    messages = " ".join(m for _, m in info.value.problems)
    for fragment in ("user-info", "query string", "fragment", "scheme must be https"):
        assert fragment in messages


def test_wildcard_opts_in_to_nothing_and_is_reported() -> None:
    cfg = parse_config({"agents": [{"id": "a", "tools": ["*"]}]})
    assert cfg.agent_tools("a") == ()
    assert any("wildcard" in w for w in cfg.warnings)


def test_duplicate_urls_and_loopback_rules() -> None:
    base = {
        "agent_id": "a",
        "name": "n",
        "kind": "json_record",
        "fields": ["x"],
    }
    with pytest.raises(ConfigError) as info:
        parse_config(
            {
                "agents": [{"id": "a"}],
                "resources": [
                    {**base, "id": "one", "url": "https://Example.com:443/r/1"},
                    {**base, "id": "two", "url": "https://example.com/r/1"},
                    {
                        **base,
                        "id": "three",
                        "url": "http://localhost:8080/r",
                        "allow_loopback_http": True,
                    },
                    {**base, "id": "four", "url": "http://127.0.0.1:8080/r"},
                ],
            }
        )
    problems = dict(info.value.problems)
    assert "already mapped" in problems["resources[1].url"]
    assert "literal loopback" in problems["resources[2].url"]
    assert "allow_loopback_http" in problems["resources[3].url"]


_RECORD = {"agent_id": "a", "name": "n", "kind": "json_record", "fields": ["x"]}


def url_problems_of(*urls: str, **extra: object) -> dict[str, list[str]]:
    """The problems of one config that maps each URL as a resource, by YAML path."""
    resources = [{**_RECORD, "id": f"r{i}", "url": url, **extra} for i, url in enumerate(urls)]
    with pytest.raises(ConfigError) as info:
        parse_config({"agents": [{"id": "a"}], "resources": resources})
    found: dict[str, list[str]] = {}
    for path, message in info.value.problems:
        found.setdefault(path, []).append(message)
    return found


def test_dot_segments_are_refused_with_their_path() -> None:
    # The aliasing forms: three spellings of one record.
    base = "https://records.example.com/records"
    problems = url_problems_of(f"{base}/r1", f"{base}/./r1", f"{base}/x/../r1")
    assert "resources[0].url" not in problems
    for where, segment in (("resources[1].url", "'.'"), ("resources[2].url", "'..'")):
        [dots] = [m for m in problems[where] if "dot segment" in m]
        assert segment in dots and "exactly what is written" in dots
        [same] = [m for m in problems[where] if "already mapped" in m]
        assert "resources[0]" in same and f"{base}/r1" in same


@pytest.mark.parametrize(
    "path", ["/%2e/r1", "/x/%2E%2E/r1", "/x/.%2e/r1", "/r1/.", "/r1/..", "/x/..;v=1/r1"]
)
def test_percent_encoded_and_parameter_dot_segments_are_refused(path: str) -> None:
    problems = url_problems_of(f"https://records.example.com/records{path}")
    assert ["dot segment" in m for m in problems["resources[0].url"]] == [True]


@pytest.mark.parametrize(
    ("first", "alias"),
    [
        ("https://records.example.com/records/r1", "HTTPS://Records.Example.COM/records/r1"),
        ("https://records.example.com/records/r1", "https://records.example.com:443/records/r1"),
        ("https://records.example.com/records/r1", "https://records.example.com/%72ecords/r%31"),
        ("https://records.example.com/records/r%2Fa", "https://records.example.com/records/r%2fa"),
        ("https://records.example.com/records/~r1", "https://records.example.com/records/%7Er1"),
    ],
)
def test_spellings_of_one_url_are_caught_as_duplicates(first: str, alias: str) -> None:
    problems = url_problems_of(first, alias)
    assert list(problems) == ["resources[1].url"]
    [same] = problems["resources[1].url"]
    assert "already mapped by resources[0]" in same


def test_a_loopback_port_spelling_is_a_duplicate_too() -> None:
    problems = url_problems_of(
        "http://127.0.0.1:80/r/1", "http://127.0.0.1/r/1", allow_loopback_http=True
    )
    assert "already mapped by resources[0]" in problems["resources[1].url"][0]


def test_a_test_copy_that_spells_its_production_url_differently_is_refused() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(
            {
                "agents": [{"id": "a"}],
                "resources": [
                    {**_RECORD, "id": "prod", "url": "https://records.example.com/r/1"},
                    {
                        **_RECORD,
                        "id": "copy",
                        "url": "https://Records.example.com/r/%31",
                        "test_copy_of": "prod",
                    },
                ],
            }
        )
    assert "already mapped by resources[0]" in dict(info.value.problems)["resources[1].url"]


def test_different_objects_on_one_host_still_load() -> None:
    urls = [
        "https://records.example.com/records/r1",
        "https://records.example.com/records/R1",
        "https://records.example.com/records/r1/",
        "https://records.example.com/records/..r1",
        "https://records.example.com/records%2Fr1",
        "https://records.example.com:8443/records/r1",
    ]
    cfg = parse_config(
        {
            "agents": [{"id": "a"}],
            "resources": [{**_RECORD, "id": f"r{i}", "url": u} for i, u in enumerate(urls)],
        }
    )
    assert [r.url for r in cfg.resources] == urls  # kept exactly as written


def test_an_ordinary_url_keeps_its_fingerprint() -> None:
    # Recorded before URL normalisation existed: every job of an existing config is
    # bound to it, so a change here would invalidate them all at the next start.
    cfg = parse_config(yaml.safe_load(GOOD))
    customer = cfg.resource("customer")
    assert customer is not None
    expected = "sha256:a92d95df98b6fb5d7a4922ae85218c14fa58233b0603f634a7bd4c9e557fd434"
    assert customer.fingerprint == expected


def test_a_literal_address_the_policy_refuses_is_refused_at_load() -> None:
    """The same verdict the send would give (docs/security.md), before the first request."""
    problems = url_problems_of(
        "https://169.254.169.254/latest/meta-data",
        "https://10.0.0.5/records/r1",
        "https://[::ffff:127.0.0.1]/records/r1",
        "https://0.0.0.0/records/r1",
    )
    assert sorted(problems) == [f"resources[{i}].url" for i in range(4)]
    assert all("refused by the network policy" in p[0] for p in problems.values())
    opened = parse_config(
        {
            "agents": [{"id": "a"}],
            "resources": [
                {
                    **_RECORD,
                    "id": "r0",
                    "url": "https://10.0.0.5/records/r1",
                    "allow_private_host": True,
                }
            ],
        }
    )
    assert opened.resources[0].allow_private_host  # opened for it: private is allowed


def test_a_url_that_does_not_parse_is_a_problem_not_a_traceback() -> None:
    problems = url_problems_of("https://[::1/records/r1")
    assert problems == {"resources[0].url": ["is not a valid URL"]}


def test_fingerprint_tracks_identity_not_token_value() -> None:
    def fp(**over: object) -> str:
        res: dict[str, object] = {
            "id": "r",
            "agent_id": "a",
            "name": "n",
            "kind": "json_record",
            "url": "https://example.com/r/1",
            "fields": ["x", "y"],
            "token_env": "TOK",
        }
        res.update(over)
        cfg = parse_config({"agents": [{"id": "a"}], "resources": [res]})
        resource = cfg.resource("r")
        assert resource is not None
        return resource.fingerprint

    base = fp()
    assert fp(fields=["y", "x"]) == base  # order is not identity
    assert fp(name="Renamed") == base
    for change in (
        {"url": "https://example.com/r/2"},
        {"token_env": "OTHER"},
        {"token_scheme": "basic"},
        {"fields": ["x"]},
        {"record_pointer": "/data"},
        {"allow_private_host": True},
    ):
        assert fp(**change) != base, change


def test_invalid_yaml_and_duplicate_keys_are_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("server:\n  data_dir: a\n  data_dir: b\n")
    with pytest.raises(ConfigError, match="duplicate key"):
        load_config(path)
    path.write_text("server: [unclosed\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(path)


def test_cli_reports_problems_without_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(BAD)
    result = run([sys.executable, "-m", "undogate.cli", "check-config", "--config", str(path)])
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "\n  resources[0].url: " in result.stderr  # one problem a line


def test_numeric_host_spellings_and_missing_ca_bundle_are_config_problems(tmp_path: Path) -> None:
    res = {"agent_id": "a", "name": "n", "kind": "json_record", "fields": ["x"]}
    with pytest.raises(ConfigError) as info:
        parse_config(
            {
                "server": {"ca_bundle": "missing.pem"},
                "agents": [{"id": "a"}],
                "resources": [
                    {**res, "id": "dec", "url": "https://2130706433/r"},
                    {**res, "id": "hex", "url": "https://0x7f000001/r"},
                    {**res, "id": "short", "url": "https://127.1/r"},
                ],
            },
            base_dir=tmp_path,
        )
    paths = [p for p, _ in info.value.problems]
    for expected in (
        "server.ca_bundle",
        "resources[0].url",
        "resources[1].url",
        "resources[2].url",
    ):
        assert expected in paths


def _copy_config(*extra: dict[str, object]) -> dict[str, object]:
    base = {"agent_id": "a", "name": "n", "kind": "json_record", "fields": ["x", "y"]}
    return {
        "agents": [{"id": "a"}],
        "resources": [
            {**base, "id": "prod", "url": "https://h.example/r/1"},
            {**base, "id": "copy", "url": "https://h.example/r/2", "test_copy_of": "prod"},
            *extra,
        ],
    }


def test_a_test_copy_names_another_resource_of_the_same_shape() -> None:
    cfg = parse_config(_copy_config())
    copy, prod = cfg.resource("copy"), cfg.resource("prod")
    assert copy is not None and prod is not None
    assert copy.test_copy_of == "prod" and prod.test_copy_of is None
    # Not identity: the same resource without the key keeps its fingerprint.
    plain = parse_config(
        {
            "agents": [{"id": "a"}],
            "resources": [{**copy.model_dump(exclude={"test_copy_of"}), "kind": "json_record"}],
        }
    ).resource("copy")
    assert plain is not None and plain.fingerprint == copy.fingerprint


def test_only_production_is_warned_that_conditional_writes_is_false() -> None:
    # A test copy is where conditional_writes is earned (check-endpoint): no warning.
    warnings = parse_config(_copy_config()).warnings
    assert [w for w in warnings if "conditional_writes" in w] == [
        "resources[0]: conditional_writes is false; writes to 'prod' are refused until the "
        "operator attests the remote contract"
    ]


def test_test_copy_problems_are_reported_with_their_paths() -> None:
    base = {"agent_id": "a", "name": "n", "kind": "json_record", "fields": ["x", "y"]}
    with pytest.raises(ConfigError) as info:
        parse_config(
            _copy_config(
                {**base, "id": "c1", "url": "https://h.example/r/3", "test_copy_of": "nope"},
                {**base, "id": "c2", "url": "https://h.example/r/4", "test_copy_of": "c2"},
                {**base, "id": "c3", "url": "https://h.example/r/5", "test_copy_of": "copy"},
                {
                    **base,
                    "id": "c4",
                    "url": "https://h.example/r/6",
                    "test_copy_of": "prod",
                    "fields": ["x"],
                },
                {
                    **base,
                    "id": "c5",
                    "url": "https://h.example/r/7",
                    "test_copy_of": "prod",
                    "record_pointer": "/data",
                },
                {
                    "agent_id": "a",
                    "name": "n",
                    "kind": "webdav_text",
                    "id": "c6",
                    "url": "https://h.example/d/1",
                    "test_copy_of": "prod",
                },
            )
        )
    problems = dict(info.value.problems)
    assert "no resource 'nope'" in problems["resources[2].test_copy_of"]
    assert "itself" in problems["resources[3].test_copy_of"]
    assert "'copy' is itself a test copy" in problems["resources[4].test_copy_of"]
    assert "fields" in problems["resources[5].test_copy_of"]
    assert "record_pointer" in problems["resources[6].test_copy_of"]
    assert "json_record, not a webdav_text" in problems["resources[7].test_copy_of"]


FAIR_SHARES = (
    "max_unresolved_jobs_per_agent",
    "max_unresolved_jobs_per_owner",
    "max_prepares_per_minute",
    "prepare_burst",
)


def test_fair_share_settings_default_as_documented() -> None:
    limits = parse_config({}).limits
    assert (
        limits.max_unresolved_jobs_per_agent,
        limits.max_unresolved_jobs_per_owner,
        limits.max_prepares_per_minute,
        limits.prepare_burst,
    ) == (100, 500, 60, 30)
    assert parse_config({"limits": {"prepare_burst": 1, "max_prepares_per_minute": 1}})


@pytest.mark.parametrize("setting", FAIR_SHARES)
@pytest.mark.parametrize("bad", [0, -3, 10**9 + 1, 1.5, True, "10", None, [5]])
def test_a_bad_fair_share_setting_is_one_clear_problem(setting: str, bad: object) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"limits": {setting: bad}})
    assert len(info.value.problems) == 1, info.value.problems
    path, message = info.value.problems[0]
    assert path == f"limits.{setting}"
    assert message in (
        "Input should be greater than or equal to 1",
        "Input should be less than or equal to 1000000000",
        "Input should be a valid integer",
    )


@pytest.mark.parametrize("setting", sorted(Limits.model_fields))
@pytest.mark.parametrize("bad", [True, False, "5", "5.0", None, [5], {"n": 5}])
def test_every_limit_is_a_number_written_as_one(setting: str, bad: object) -> None:
    """`true` or `"5"` never quietly becomes a limit (pydantic would read both as 1 and
    5 in its lax mode)."""
    with pytest.raises(ConfigError) as info:
        parse_config({"limits": {setting: bad}})
    assert [path for path, _ in info.value.problems] == [f"limits.{setting}"]
    assert info.value.problems[0][1] in (
        "Input should be a valid integer",
        "Input should be a valid number",
    )


@pytest.mark.parametrize("setting", sorted(Limits.model_fields))
def test_every_limit_takes_a_plain_number(setting: str) -> None:
    # An agent's quota is at most its owner's (checked apart): both set, equal.
    quotas = {"max_unresolved_jobs_per_agent": 5} if "per_owner" in setting else {}
    assert getattr(parse_config({"limits": {setting: 5, **quotas}}).limits, setting) == 5


def test_an_agent_quota_above_its_owners_is_one_clear_problem() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(
            {"limits": {"max_unresolved_jobs_per_agent": 10, "max_unresolved_jobs_per_owner": 5}}
        )
    assert info.value.problems == [
        (
            "limits.max_unresolved_jobs_per_agent",
            "must not exceed limits.max_unresolved_jobs_per_owner (5): an owner's agent can "
            "never hold more unresolved jobs than the owner",
        )
    ]
    equal = {"max_unresolved_jobs_per_agent": 5, "max_unresolved_jobs_per_owner": 5}
    assert parse_config({"limits": equal}).limits.max_unresolved_jobs_per_owner == 5
