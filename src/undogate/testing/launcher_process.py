"""The launcher's own side (``launcher.py`` is its callers'): import undogate, then fork a
child per request, and reap it.

A request is a 4-byte length, then that many bytes of JSON (``argv`` after the
interpreter, ``env``, ``cwd``, ``setsid``); the child's stdin, stdout and stderr travel
with the length as SCM_RIGHTS. The answers are lines on the same connection: the child's
pid, then its exit status as ``subprocess`` reports it (the negated signal number when a
signal killed it). The caller hanging up ends its child; the launcher's stdin ending ends
the launcher and every child it still has.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import runpy
import selectors
import signal
import socket
import struct
import sys
import threading
import traceback
from typing import IO, Any

#: What the launcher imports before it forks: the CLI and everything ``serve`` runs.
PRELOAD = (
    "undogate.cli",
    "undogate.cli.serve",
    "undogate.app",
    "undogate.api",
    "undogate.web",
    "undogate.mcp.http",
    "uvicorn",
    "uvicorn.lifespan.on",
    "uvicorn.loops.asyncio",
    "uvicorn.protocols.http.h11_impl",
    "uvicorn.protocols.websockets.auto",
)

LENGTH = struct.Struct("!I")
STDIO = 3  # stdin, stdout, stderr travel with every request


class _Forked:
    """A child of the launcher: the caller's connection (None once it hung up) and the
    descriptor that becomes readable when the child exits."""

    def __init__(self, pid: int, connection: socket.socket, own_session: bool) -> None:
        self.pid = pid
        self.connection: socket.socket | None = connection
        self.pidfd = os.pidfd_open(pid)
        self.own_session = own_session

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):  # already gone
            if self.own_session:
                os.killpg(self.pid, signal.SIGKILL)
            else:
                os.kill(self.pid, signal.SIGKILL)


def main(address: str) -> None:
    """Import undogate, then fork a child per request until stdin ends."""
    import gc
    import importlib

    for module in PRELOAD:
        importlib.import_module(module)
    if threading.active_count() != 1:
        raise RuntimeError("importing undogate started a thread; a fork would lose it")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(64)
    gc.freeze()  # what was imported stays shared with the children, page for page
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    lifeline = sys.stdin.fileno()
    selector.register(lifeline, selectors.EVENT_READ)
    children: dict[int, _Forked] = {}  # by pidfd, and by connection descriptor
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    try:
        while True:
            for key, _ in selector.select():
                if selector.get_map().get(key.fd) is not key:
                    continue  # unregistered by an earlier event of this batch
                if key.fd == lifeline:
                    if not os.read(lifeline, 4096):
                        return
                elif key.fd == listener.fileno():
                    connection, _ = listener.accept()
                    child = _fork_child(connection)
                    if child is None:
                        connection.close()
                        continue
                    children[child.pidfd] = children[connection.fileno()] = child
                    selector.register(child.pidfd, selectors.EVENT_READ)
                    selector.register(connection, selectors.EVENT_READ)
                elif key.fd in children and children[key.fd].pidfd == key.fd:
                    child = children.pop(key.fd)
                    _, status = os.waitpid(child.pid, 0)
                    selector.unregister(child.pidfd)
                    os.close(child.pidfd)
                    if child.connection is not None:
                        _hang_up(child.connection, selector, children)
                        with contextlib.suppress(OSError):  # nobody waits for it any more
                            child.connection.sendall(b"%d\n" % os.waitstatus_to_exitcode(status))
                        child.connection.close()
                else:  # the caller hung up (or sent what it should not): end its child
                    child = children[key.fd]
                    assert child.connection is not None
                    _hang_up(child.connection, selector, children)
                    child.connection.close()
                    child.connection = None
                    child.kill()
    finally:
        running = {child.pid: child for child in children.values()}
        for child in running.values():
            child.kill()
        for pid in running:
            os.waitpid(pid, 0)
        listener.close()
        os.unlink(address)


def _hang_up(
    connection: socket.socket, selector: selectors.BaseSelector, children: dict[int, _Forked]
) -> None:
    selector.unregister(connection)
    del children[connection.fileno()]


def _fork_child(connection: socket.socket) -> _Forked | None:
    """Read one request and fork its child (None: a request cut short or malformed)."""
    connection.settimeout(10)
    try:
        header, fds, _, _ = socket.recv_fds(connection, LENGTH.size, STDIO)
        (length,) = LENGTH.unpack(header)
        body = b""
        while len(body) < length:
            chunk = connection.recv(length - len(body))
            if not chunk:
                raise ConnectionError("the request was cut short")
            body += chunk
        request = json.loads(body)
    except (OSError, ValueError, struct.error):
        return None
    pid = os.fork()
    if pid == 0:
        _run_child(request, fds)  # never returns
    for fd in fds:
        os.close(fd)
    connection.sendall(b"%d\n" % pid)
    return _Forked(pid, connection, bool(request["setsid"]))


def _run_child(request: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: become the command a fresh interpreter would have run."""
    code = 1
    try:
        if request["setsid"]:
            os.setsid()
        signal.set_wakeup_fd(-1)
        signal.pthread_sigmask(signal.SIG_SETMASK, ())
        for sig in signal.valid_signals():
            if sig in (signal.SIGKILL, signal.SIGSTOP):
                continue
            fresh: Any = signal.SIG_DFL
            if sig == signal.SIGINT:
                fresh = signal.default_int_handler
            elif sig in (signal.SIGPIPE, signal.SIGXFSZ):
                fresh = signal.SIG_IGN  # as Python sets them at start-up
            with contextlib.suppress(OSError, ValueError):  # not every one can be set
                signal.signal(sig, fresh)
        for number, fd in enumerate(fds):
            os.dup2(fd, number)
        os.closerange(STDIO, os.sysconf("SC_OPEN_MAX"))  # the launcher's, and the sent ones
        _fresh_stdio()
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        argv: list[str] = request["argv"]
        if argv[0] != "-m":
            raise ValueError(f"not a module to run: {argv}")
        sys.argv = [argv[1], *argv[2:]]
        sys.path[0] = request["cwd"]  # as ``python -m`` puts the working directory first
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except KeyboardInterrupt:
        code = -signal.SIGINT
    except BaseException:
        traceback.print_exc()
    os._exit(_finish(code))


#: The launcher's own standard streams, kept from being collected in a child: collecting
#: one would close the descriptor the child's stream now uses.
_LAUNCHERSTDIO: list[IO[str]] = []


def _fresh_stdio() -> None:
    """Standard streams over the child's descriptors as an interpreter makes them at
    start-up: line-buffered on a terminal (stderr always), block-buffered otherwise."""
    for number, name in enumerate(("stdin", "stdout", "stderr")):
        old: IO[str] = getattr(sys, name)
        _LAUNCHERSTDIO.append(old)
        writing = number > 0
        lines = writing and (name == "stderr" or os.isatty(number))
        stream = open(  # noqa: SIM115 - the child's stream for as long as it runs
            number,
            "w" if writing else "r",
            buffering=1 if lines else -1,
            encoding=getattr(old, "encoding", None),
            errors=getattr(old, "errors", None),
            closefd=False,
        )
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _exit_code(code: object) -> int:
    """What the interpreter makes of ``sys.exit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _finish(code: int) -> int:
    """The interpreter's shutdown: wait for the threads it waits for, run the atexit
    handlers, flush the standard streams; die of SIGINT as it would."""
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120  # as the interpreter exits when flushing fails
    if code == -signal.SIGINT:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return code
