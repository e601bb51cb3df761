"""Exact bytes through the SDK's real MCP client: ``raw(...)`` placeholders, and
``python -m tests.raw_stdin COMMAND...``, which runs COMMAND with this process's stdin
piped through ``inject_raw`` line by line (its stdout and stderr are this process's).

An MCP client serialises its messages itself, so it cannot send ``1.50``, a duplicate
key or invalid UTF-8. A test puts ``raw(b'1.50')`` where the value goes; this filter (in
front of ``undogate mcp``) or ``conftest.RawInjecting`` (under the HTTP client) puts
the exact bytes on the wire.
"""

from __future__ import annotations

import re
import subprocess
import sys

_RAW = re.compile(rb'"@raw@([0-9a-f]*)@"')


def raw(text: str | bytes) -> str:
    """A placeholder that ``inject_raw`` turns into exactly ``text`` on the wire."""
    data = text.encode() if isinstance(text, str) else text
    return f"@raw@{data.hex()}@"


def inject_raw(data: bytes) -> bytes:
    return _RAW.sub(lambda m: bytes.fromhex(m.group(1).decode()), data)


def main(command: list[str]) -> int:
    child = subprocess.Popen(command, stdin=subprocess.PIPE)
    assert child.stdin is not None
    for line in sys.stdin.buffer:
        child.stdin.write(inject_raw(line))
        child.stdin.flush()
    child.stdin.close()
    return child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
