"""docs/agents.md's Python example, run as written: its code block is read from the doc
(so the test fails when the doc drifts), pointed at a served gateway with a real agent
token, and run with the clone's own interpreter from the clone's folder, both over
streamable HTTP and over stdio (``.venv/bin/undogate mcp``, the command the doc names)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "agents.md"


def example() -> str:
    section = DOC.read_text(encoding="utf-8").split("## 3. A short Python example", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block, "docs/agents.md has no Python example"
    return block.group(1)


@pytest.mark.skipif(
    not (ROOT / ".venv" / "bin" / "undogate").exists(), reason="no .venv in this clone"
)
def test_the_python_example_runs_as_written(served: dict[str, Any], tmp_path: Path) -> None:
    code = example()
    assert 'TOKEN = "uga_0123456789ab_..."' in code and "http://127.0.0.1:8080" in code
    code = code.replace("uga_0123456789ab_...", str(served["agent"])).replace(
        "http://127.0.0.1:8080", str(served["url"])
    )
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    ran = subprocess.run(
        [sys.executable, str(script)],
        cwd=ROOT,  # "run it from your clone"
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    lines = ran.stdout.splitlines()
    assert lines[0] == "['list_resources', 'prepare_changes']"
    assert "'job_id': 'job_" in ran.stdout and "'state': 'prepared'" in ran.stdout
    stdio = [line for line in lines if line.startswith("over stdio:")]
    assert len(stdio) == 1 and "'id': 'customer'" in stdio[0]
