"""A child for tests/test_launcher.py to launch: ``python -m tests.launched_child WHAT``."""

from __future__ import annotations

import json
import os
import random
import sys
import time


def main(what: str, *args: str) -> None:
    if what == "exit":
        sys.exit(int(args[0]))
    if what == "raise":
        raise RuntimeError("raised in the child")
    if what == "echo":  # stdin to stdout, a line to stderr
        sys.stdout.write(sys.stdin.read().upper())
        print("said on stderr", file=sys.stderr)
        return
    if what == "where":
        shown = {
            "cwd": os.getcwd(),
            "env": os.environ.get(args[0]),
            "argv": sys.argv,
            "pid": os.getpid(),
            "random": random.random(),
            "pytest": "pytest" in sys.modules,
        }
        print(json.dumps(shown))
        return
    if what == "sleep":
        print("sleeping", flush=True)
        time.sleep(float(args[0]))
        return
    raise SystemExit(f"unknown: {what}")


if __name__ == "__main__":
    main(*sys.argv[1:])
