"""Starting ``python -m undogate.cli ...`` quickly, many times: a launcher process that has
imported undogate's CLI and serving stack once forks a child per command.

A test suite that starts ``undogate serve`` for every test spends most of its CPU importing
the same modules again. Here one launcher per test process imports them once (and starts
no thread, no event loop, opens nothing but its socket), then, asked over a Unix socket,
forks a child with the argv, environment, working directory and stdio (passed as file
descriptors) of the command. The child is a real process with its own pid: a signal sent
to it (SIGKILL included) reaches the gateway itself, and its exit status, death by a
signal included, comes back from the launcher, which reaps it.

``popen`` and ``run`` are what callers use: they go through the launcher for
``[sys.executable, "-m", "undogate..."]`` and start any other command, or any command whose
environment changes what an interpreter does at start-up (``PYTHON*`` variables), as a
plain subprocess; so does everything when the launcher cannot be used (not Linux, or
``UNDOGATE_TEST_LAUNCHER=0``). A child whose handle is closed or collected while it still
runs is killed, and the launcher (with its children) ends when the process that started
it does.
"""

from __future__ import annotations

import atexit
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

from .launcher_process import LENGTH

DISABLE_ENV = "UNDOGATE_TEST_LAUNCHER"  # "0": every command as a plain subprocess
#: What the launcher runs: the file itself, so that importing this package (the kit,
#: pytest with it) is not part of what every child inherits.
_PROCESS = Path(__file__).with_name("launcher_process.py")


class Child(Protocol):
    """What ``popen`` returns: a ``subprocess.Popen`` or a launched child, used alike."""

    @property
    def pid(self) -> int: ...
    @property
    def returncode(self) -> int | None: ...
    @property
    def stdin(self) -> IO[Any] | None: ...
    @property
    def stdout(self) -> IO[Any] | None: ...
    @property
    def stderr(self) -> IO[Any] | None: ...
    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def send_signal(self, sig: int) -> None: ...
    def kill(self) -> None: ...
    def terminate(self) -> None: ...


# -- the caller's side -------------------------------------------------------------------


def popen(
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stdin: int | IO[Any] | None = None,
    stdout: int | IO[Any] | None = None,
    stderr: int | IO[Any] | None = None,
    text: bool = False,
    start_new_session: bool = False,
) -> Child:
    """Like ``subprocess.Popen`` (the arguments it shares with it, ``PIPE``, ``DEVNULL``
    and ``STDOUT`` included): through the launcher when ``command`` is undogate's."""
    environ = dict(os.environ if env is None else env)
    launcher = _launcher_for(command, environ)
    if launcher is None:
        return subprocess.Popen(  # noqa: S603 - the caller's own command
            list(command),
            env=environ,
            cwd=cwd,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            text=text,
            start_new_session=start_new_session,
        )
    return launcher.launch(
        list(command),
        environ,
        os.fspath(cwd) if cwd is not None else os.getcwd(),
        (stdin, stdout, stderr),
        text=text,
        start_new_session=start_new_session,
    )


def run(
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    input: str | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """Like ``subprocess.run(..., capture_output=True, text=True, check=False)``. The
    output is collected in files, so neither stream can fill and stall the command."""
    with (
        tempfile.TemporaryFile() as given,
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
    ):
        if input is not None:
            given.write(input.encode())
            given.seek(0)
        child = popen(
            command,
            env=env,
            cwd=cwd,
            stdin=given if input is not None else subprocess.DEVNULL,
            stdout=out,
            stderr=err,
        )
        try:
            code = child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            raise
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(
            list(command), code, _decoded(out.read()), _decoded(err.read())
        )


def _decoded(data: bytes) -> str:
    # As subprocess's text mode reads a pipe: the locale's encoding, universal newlines.
    return io.TextIOWrapper(io.BytesIO(data)).read()


class Launched:
    """A child forked by the launcher, used as a ``subprocess.Popen`` is."""

    def __init__(
        self,
        args: list[str],
        connection: socket.socket,
        pipes: tuple[IO[Any] | None, IO[Any] | None, IO[Any] | None],
    ) -> None:
        self.args = args
        self._connection: socket.socket | None = connection
        self._answer = b""
        self.stdin, self.stdout, self.stderr = pipes
        self.returncode: int | None = None
        self.pid = int(self._line(None))

    def poll(self) -> int | None:
        if self.returncode is None:
            self._exit_status(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None and self._exit_status(timeout) is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        # A child not yet reaped keeps its pid, so the signal cannot reach another
        # process; once reaped, its status has been sent (poll sees it), as Popen does.
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def close(self) -> None:
        """Stop caring: a child still running is killed by the launcher."""
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def __enter__(self) -> Launched:
        return self

    def __exit__(self, *exc: object) -> None:
        """As ``Popen`` does: close the pipes, wait for the child."""
        for pipe in (self.stdout, self.stderr, self.stdin):
            if pipe is not None:
                pipe.close()
        self.wait()

    def __del__(self) -> None:
        self.close()

    def _exit_status(self, timeout: float | None) -> int | None:
        try:
            self.returncode = int(self._line(timeout))
        except TimeoutError:
            return None
        self.close()
        return self.returncode

    def _line(self, timeout: float | None) -> str:
        """The launcher's next line on this child (its pid, then its exit status)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._answer:
            if self._connection is None:
                raise RuntimeError("the launcher's connection for this child is closed")
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            self._connection.settimeout(left)
            try:
                chunk = self._connection.recv(64)
            except BlockingIOError as exc:  # settimeout(0) reads without waiting
                raise TimeoutError from exc
            if not chunk:
                raise RuntimeError("the launcher ended before this child did")
            self._answer += chunk
        line, self._answer = self._answer.split(b"\n", 1)
        return line.decode()


class Launcher:
    """One launcher process, started by ``start`` and ended with its starter."""

    def __init__(self) -> None:
        self._directory = Path(tempfile.mkdtemp(prefix="undogate-launcher-"))
        self.address = str(self._directory / "socket")
        #: The variables it started with: a command with other PYTHON* values needs a
        #: fresh interpreter.
        self.environ = dict(os.environ)
        self.process = subprocess.Popen(  # noqa: S603 - this interpreter, this module
            [
                sys.executable,
                "-c",
                f"import runpy; runpy.run_path({str(_PROCESS)!r})['main']({self.address!r})",
            ],
            stdin=subprocess.PIPE,  # its lifeline: at EOF it ends, and its children
            stdout=subprocess.PIPE,
            env=self.environ,
        )
        assert self.process.stdout is not None
        ready = self.process.stdout.readline()
        if ready != b"ready\n":
            self.process.kill()
            raise RuntimeError(f"the launcher did not start (it said {ready!r})")

    def alive(self) -> bool:
        return self.process.poll() is None

    def launch(
        self,
        command: list[str],
        env: dict[str, str],
        cwd: str,
        stdio: tuple[int | IO[Any] | None, ...],
        *,
        text: bool,
        start_new_session: bool,
    ) -> Launched:
        fds: list[int] = []
        opened: list[int] = []  # descriptors opened here for the child, closed once sent
        pipes: list[IO[Any] | None] = []
        for number, given in enumerate(stdio):
            fd, ours, pipe = _descriptor(number, given, fds)
            fds.append(fd)
            if ours:
                opened.append(fd)
            pipes.append(pipe)
        request = json.dumps(
            {"argv": command[1:], "env": env, "cwd": cwd, "setsid": start_new_session}
        ).encode()
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            connection.connect(self.address)
            socket.send_fds(connection, [LENGTH.pack(len(request))], fds)
            connection.sendall(request)
        except OSError:
            connection.close()
            for pipe in pipes:
                if pipe is not None:
                    pipe.close()
            raise
        finally:
            for fd in opened:
                os.close(fd)
        if text:
            pipes = [None if p is None else _as_text(p) for p in pipes]
        return Launched(command, connection, (pipes[0], pipes[1], pipes[2]))

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        shutil.rmtree(self._directory, ignore_errors=True)


def _descriptor(
    number: int, given: int | IO[Any] | None, earlier: list[int]
) -> tuple[int, bool, IO[Any] | None]:
    """The descriptor the child gets as stdio ``number``, whether it was opened here for
    the child, and the caller's end of a pipe."""
    if given is None:
        return number, False, None
    if given == subprocess.PIPE:
        read, write = os.pipe()
        if number == 0:
            return read, True, os.fdopen(write, "wb")
        return write, True, os.fdopen(read, "rb")
    if given == subprocess.DEVNULL:
        return os.open(os.devnull, os.O_RDWR), True, None
    if given == subprocess.STDOUT:
        return earlier[1], False, None
    if isinstance(given, int):
        return given, False, None
    return given.fileno(), False, None


def _as_text(pipe: IO[Any]) -> IO[str]:
    writing = "w" in pipe.mode
    return io.TextIOWrapper(pipe, write_through=writing)


_shared: Launcher | None = None
_starting = threading.Lock()


def _launcher_for(command: Sequence[str], env: Mapping[str, str]) -> Launcher | None:
    """This process's launcher when it can run ``command`` in ``env``, else None."""
    global _shared
    if not _launchable(command) or os.environ.get(DISABLE_ENV) == "0":
        return None
    with _starting:
        if _shared is None or not _shared.alive():
            _shared = Launcher()
            atexit.register(_shared.close)
        launcher = _shared
    if _interpreter_settings(env) != _interpreter_settings(launcher.environ):
        return None
    return launcher


def _launchable(command: Sequence[str]) -> bool:
    return (
        sys.platform == "linux"
        and len(command) >= 3
        and command[0] == sys.executable
        and command[1] == "-m"
        and command[2].split(".")[0] == "undogate"
    )


def _interpreter_settings(env: Mapping[str, str]) -> dict[str, str]:
    # What an interpreter or a module reads once, when it starts or is imported.
    return {
        k: v for k, v in env.items() if k.startswith("PYTHON") or k == "PROMETHEUS_MULTIPROC_DIR"
    }
