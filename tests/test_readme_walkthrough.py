"""The README's "Running it for real", run as written: its code block is parsed from the
README (so the test fails when the README drifts) and each command runs in order, in a
fresh folder, against the servers the block itself starts. Nothing is added between
steps. What the test supplies is what a reader would: the values earlier commands
printed in place of ``ugo_...``, ``uga_...`` and ``job_...``, a typed answer where a
command asks for one, and free ports in place of 8765 and 8080 in the commands (the
config follows from ``init --example --port``) so that the test never collides with
anything else on this machine."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .processes import stop
from .serving import free_port, wait_healthy
from .test_cli_review import Terminal

README = Path(__file__).parent.parent / "README.md"
UNDOGATE = ".venv/bin/undogate"


def walkthrough() -> list[str]:
    """The commands of the README's "Running it for real" block, comments dropped."""
    text = README.read_text(encoding="utf-8")
    section = text.split("### Running it for real", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "the README's 'Running it for real' has no sh block"
    commands = []
    for line in block.group(1).splitlines():
        command = re.split(r"\s{2,}#\s", line, maxsplit=1)[0].strip()
        if command and not command.startswith("#"):
            commands.append(command)
    return commands


@pytest.fixture
def background() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in reversed(started):
        stop(proc)
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()


def test_the_readme_walkthrough_runs_as_written(
    tmp_path: Path, background: list[subprocess.Popen[str]]
) -> None:
    commands = walkthrough()
    verbs = [c.split()[1] if c.startswith(UNDOGATE) else c.split()[0] for c in commands]
    assert verbs == [
        "contract-server", "init", "serve", "export", "keys", "curl", "jobs", "jobs", "apply",
        "undo",
    ]  # fmt: skip
    contract_port, gateway_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("UNDOGATE_")}
    found: dict[str, str] = {}
    for command in commands:
        line = (
            command.replace(UNDOGATE, f"{shlex.quote(sys.executable)} -m undogate.cli")
            .replace("8765", str(contract_port))
            .replace("8080", str(gateway_port))
        )
        for placeholder, value in found.items():
            line = line.replace(placeholder, value)
        assert "..." not in line, f"nothing printed a value for {line!r}"
        if line.startswith("export "):
            for assignment in shlex.split(line)[1:]:
                name, _, value = assignment.partition("=")
                env[name] = value
            continue
        if line.endswith("&"):
            proc = subprocess.Popen(
                ["bash", "-c", line.removesuffix("&").strip()],
                cwd=tmp_path,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
            background.append(proc)
            if "contract-server" in line:
                assert proc.stdout is not None
                head = proc.stdout.readline()
                assert f"listening on http://127.0.0.1:{contract_port}" in head, head
            else:
                wait_healthy(f"http://127.0.0.1:{gateway_port}", proc)
            continue
        if " apply " in line or " undo " in line:
            verb = "apply" if " apply " in line else "undo"
            term = Terminal(shlex.split(line)[3:], env)
            term.read_until(f'Type "{verb}"')
            term.send(verb)
            term.read_until("applied" if verb == "apply" else "undone")
            assert term.finish() == 0, term.text
            continue
        done = subprocess.run(
            ["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
        if " init " in line:
            found["ugo_..."] = done.stdout.strip()
            written = (tmp_path / "undogate.yaml").read_text()  # --port, as the README says
            assert f"127.0.0.1:{contract_port}/" in written and ":8765" not in written
            assert "op_" in done.stderr  # the operator id, printed with the key
        elif " create-agent " in line:
            found["uga_..."] = done.stdout.splitlines()[0]
        elif line.startswith("curl "):
            job = re.search(r'"job_id":\s*"(job_\w+)"', done.stdout)
            assert job, done.stdout
            found["job_..."] = job.group(1)
        elif line.endswith("jobs list"):
            assert found["job_..."] in done.stdout and "waiting 1" in done.stdout
    assert "job_..." in found  # every step ran, through to the undo
