"""The tests' fixtures, by topic: each module of tests/fixtures/ is a plugin loaded here.
The worlds they build and the vocabulary tests share live in tests/worlds.py; running
``undogate`` as a process is tests/serving.py's."""

pytest_plugins = [
    "tests.fixtures.gateway",  # a contract server, a ledger, the operations, the API
    "tests.fixtures.served",  # ``undogate serve`` as a subprocess
    "tests.fixtures.fleet",  # several ``undogate serve`` processes on one ledger
    "tests.fixtures.mcp",  # a served gateway with agents, and MCP sessions on it
    "tests.fixtures.servers",  # PostgreSQL, Chromium and third-party servers
    "tests.fixtures.report",  # lines shown at the end of the run
    "tests.fixtures.parallel",  # make test in parallel: how many workers, slow tests first
    # The kit's pytest plugin (the ``undogate_kit`` fixture of the kinds' contract,
    # tests/test_kinds_contract.py and tests/test_kind_from_outside.py), loaded as a
    # kind's author loads it (docs/kinds.md).
    "undogate.testing.plugin",
]
