"""Third-party servers' own environments for the tests, made once and reused.

A server from PyPI gets its own virtual environment at the repository root
(``.venv-<name>/``); the servers from npm share one prefix, ``.npm-servers/``, installed
with ``npm ci`` from the manifest and lock file in ``tests/npm-servers/`` (every transitive
version pinned, no install scripts run: nothing is compiled and nothing is fetched beyond
the registry's packages). All are gitignored and removed by ``make clean``.
``UNDOGATE_SERVER_ENVS=<folder>`` puts them in that folder instead, so that clones on one
machine share them (CI's fresh clone does: .ci/run); each is still a plain environment of
its own, checked by its stamp.

Each environment carries a stamp naming exactly what was installed, so a changed pin
reinstalls and an interrupted install starts over; a file lock keeps two test processes from
installing into the same place at once. The whole install shares one time budget, under
pytest-timeout's 300 s, so a slow registry fails with the installer's output rather than a
bare timeout.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLACE = Path(os.environ.get("UNDOGATE_SERVER_ENVS") or ROOT)
INSTALL_TIMEOUT_S = 240  # the whole install, every step together
NPM_PREFIX = PLACE / ".npm-servers"
NPM_MANIFESTS = Path(__file__).resolve().parent / "npm-servers"
STAMP_NAME = ".undogate-installed"


def python_env(name: str, *requirements: str) -> Path:
    """The ``bin`` folder of ``.venv-<name>`` holding exactly ``requirements``, made now if
    it is missing or holds something else.

    Raises:
        RuntimeError: the environment could not be made (the installer's output is included).
    """
    venv = PLACE / f".venv-{name}"

    def install(run: Callable[[list[str]], None]) -> None:
        run([sys.executable, "-m", "venv", str(venv)])
        run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", *requirements])

    _made_once(venv, "\n".join(requirements), install)
    return venv / "bin"


def npm_env() -> Path:
    """``.npm-servers/node_modules/.bin``, installed now from ``tests/npm-servers/`` if it is
    missing or was installed from another lock file.

    Raises:
        RuntimeError: npm is missing or the install failed (its output is included).
    """
    lock = (NPM_MANIFESTS / "package-lock.json").read_bytes()

    def install(run: Callable[[list[str]], None]) -> None:
        if shutil.which("npm") is None:
            raise RuntimeError("npm is not on PATH: the npm servers need Node.js 20 and npm")
        NPM_PREFIX.mkdir(parents=True)
        for manifest in ("package.json", "package-lock.json"):
            shutil.copyfile(NPM_MANIFESTS / manifest, NPM_PREFIX / manifest)
        run(
            [
                "npm",
                "ci",
                "--prefix",
                str(NPM_PREFIX),
                "--ignore-scripts",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
            ]
        )

    _made_once(NPM_PREFIX, hashlib.sha256(lock).hexdigest(), install)
    return NPM_PREFIX / "node_modules" / ".bin"


Installer = Callable[[Callable[[list[str]], None]], None]


def _made_once(place: Path, stamp_text: str, install: Installer) -> None:
    stamp = place / STAMP_NAME
    if _stamped(stamp, stamp_text):
        return
    with _install_lock(place):
        if _stamped(stamp, stamp_text):  # another process installed it while we waited
            return
        shutil.rmtree(place, ignore_errors=True)  # a partial or older install: start over
        deadline = time.monotonic() + INSTALL_TIMEOUT_S
        install(lambda command: _run(command, deadline))
        stamp.write_text(stamp_text)


def _stamped(stamp: Path, stamp_text: str) -> bool:
    return stamp.is_file() and stamp.read_text() == stamp_text


def _run(command: list[str], deadline: float) -> None:
    left = deadline - time.monotonic()
    env = {**os.environ, "CI": "true", "npm_config_update_notifier": "false"}
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=max(left, 1.0),
            check=False,
            stdin=subprocess.DEVNULL,
            env=env,
        )
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(
            f"{' '.join(command)} took longer than the {INSTALL_TIMEOUT_S}s install budget:\n"
            f"{_text(exc.stdout)}\n{_text(exc.stderr)}"
        ) from exc
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")


def _text(output: str | bytes | None) -> str:
    """What a timed-out command printed (bytes even when text was asked for)."""
    return output.decode(errors="replace") if isinstance(output, bytes) else output or ""


@contextlib.contextmanager
def _install_lock(place: Path) -> Iterator[None]:
    key = hashlib.sha256(str(place).encode()).hexdigest()[:16]
    lock_path = Path(tempfile.gettempdir()) / f"undogate-install-{place.name}-{key}.lock"
    with lock_path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
