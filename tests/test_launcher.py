"""The launcher that forks undogate's processes for the tests (undogate.testing.launcher):
its children are real processes, seen from outside as ``subprocess.Popen`` children are."""

from __future__ import annotations

import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from undogate.testing import launcher
from undogate.testing.launcher import Launched, Launcher

ROOT = Path(__file__).resolve().parents[1]
CHILD = [sys.executable, "-m", "tests.launched_child"]
CLI = [sys.executable, "-m", "undogate.cli"]


@pytest.fixture(scope="module")
def own() -> Iterator[Launcher]:
    """A launcher of this module's own (its children run tests/launched_child.py)."""
    started = Launcher()
    yield started
    started.close()


def child(
    own: Launcher,
    *args: str,
    stdio: tuple[Any, Any, Any] = (subprocess.DEVNULL, subprocess.PIPE, subprocess.PIPE),
    cwd: Path = ROOT,
    env: dict[str, str] | None = None,
    module: str = "tests.launched_child",
) -> Launched:
    return own.launch(
        [sys.executable, "-m", module, *args],
        {**os.environ, **(env or {})},
        str(cwd),
        stdio,
        text=True,
        start_new_session=False,
    )


def gone(pid: int) -> bool:
    """No such process, or only its exit status is left (a zombie nobody reaped yet)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status


def until_gone(pid: int, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while not gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)  # poll interval of a bounded wait
    return True


def test_a_child_killed_with_sigkill_is_its_own_process_and_reports_minus_9(
    own: Launcher,
) -> None:
    with child(own, "sleep", "60") as sleeper:
        assert sleeper.stdout is not None
        assert sleeper.stdout.readline() == "sleeping\n"
        assert sleeper.pid not in (os.getpid(), own.process.pid)
        assert sleeper.poll() is None
        with pytest.raises(subprocess.TimeoutExpired):
            sleeper.wait(timeout=0.2)
        os.kill(sleeper.pid, signal.SIGKILL)
        assert sleeper.wait(timeout=15) == -signal.SIGKILL
        assert sleeper.returncode == -signal.SIGKILL
    assert own.alive()  # the launcher itself was not touched


def test_exit_codes_are_the_interpreters(own: Launcher) -> None:
    for code in (3, 0):
        with child(own, "exit", str(code)) as exited:
            assert exited.wait(timeout=15) == code
    with child(own, "raise") as raised:
        assert raised.wait(timeout=15) == 1
        assert raised.stderr is not None
        said = raised.stderr.read()
        assert "Traceback" in said and "RuntimeError: raised in the child" in said
    with child(own, "no-such-thing") as message:
        assert message.wait(timeout=15) == 1
        assert message.stderr is not None
        assert message.stderr.read() == "unknown: no-such-thing\n"
    with child(own, "sleep", "60") as terminated:
        assert terminated.stdout is not None
        terminated.stdout.readline()
        terminated.terminate()
        assert terminated.wait(timeout=15) == -signal.SIGTERM


def test_stdio_pipes_and_files(own: Launcher, tmp_path: Path) -> None:
    piped = (subprocess.PIPE, subprocess.PIPE, subprocess.STDOUT)
    with child(own, "echo", stdio=piped) as echo:
        assert echo.stdin is not None and echo.stdout is not None
        echo.stdin.write("through the pipe\n")
        echo.stdin.close()
        # As from a fresh interpreter: stderr line-buffered, stdout on a pipe not.
        assert echo.stdout.read() == "said on stderr\nTHROUGH THE PIPE\n"
        assert echo.wait(timeout=15) == 0
    given = tmp_path / "given"
    given.write_text("from a file")
    with given.open("rb") as stdin, (tmp_path / "out").open("wb") as stdout:
        filed = child(own, "echo", stdio=(stdin, stdout, subprocess.DEVNULL))
        assert filed.wait(timeout=15) == 0
    assert (tmp_path / "out").read_text() == "FROM A FILE"


def test_env_cwd_argv_and_random_are_the_childs_own(own: Launcher, tmp_path: Path) -> None:
    # ``python -m`` imports from the working directory: so does a launched child.
    shutil.copy(ROOT / "tests" / "launched_child.py", tmp_path / "elsewhere.py")
    shown = []
    for value in ("one", "two"):
        seen = {"SEEN": value}
        with child(own, "where", "SEEN", module="elsewhere", cwd=tmp_path, env=seen) as where:
            assert where.wait(timeout=15) == 0, where.stderr.read() if where.stderr else ""
            assert where.stdout is not None
            shown.append(json.loads(where.stdout.read()))
    assert [s["env"] for s in shown] == ["one", "two"]
    assert {s["cwd"] for s in shown} == {str(tmp_path)}
    assert shown[0]["argv"] == [str(tmp_path / "elsewhere.py"), "where", "SEEN"]
    assert shown[0]["pid"] != shown[1]["pid"]
    assert shown[0]["random"] != shown[1]["random"]  # reseeded after each fork
    assert not shown[0]["pytest"]  # the launcher imported undogate, not the test kit


def test_children_started_at_once_from_threads_each_get_their_own_status(
    own: Launcher,
) -> None:
    # Exits, deaths and hang-ups arrive together: each child's status reaches its own
    # caller, and none is confused with another's (the launcher reuses descriptors).
    codes: dict[int, int] = {}

    def start(n: int) -> None:
        quiet = (subprocess.DEVNULL, subprocess.DEVNULL, subprocess.DEVNULL)
        if n % 3 == 0:  # dropped while it runs
            child(own, "sleep", "600", stdio=quiet).close()
            return
        with child(own, "exit", str(n), stdio=quiet) as exited:
            codes[n] = exited.wait(timeout=60)

    threads = [threading.Thread(target=start, args=(n,)) for n in range(1, 25)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert codes == {n: n for n in range(1, 25) if n % 3}
    assert own.alive()


def test_an_exit_and_a_hang_up_seen_at_once_are_both_handled(own: Launcher) -> None:
    quiet = (subprocess.DEVNULL, subprocess.DEVNULL, subprocess.DEVNULL)
    short = child(own, "sleep", "0.2", stdio=quiet)
    os.kill(own.process.pid, signal.SIGSTOP)  # the launcher sees nothing for a while
    try:
        assert until_gone(short.pid)  # exited; reaped only once the launcher runs
        short.close()  # and its caller hangs up: both wait in one batch of events
    finally:
        os.kill(own.process.pid, signal.SIGCONT)
    with child(own, "exit", "5", stdio=quiet) as after:
        assert after.wait(timeout=30) == 5
    assert own.alive()


def test_closing_the_launcher_ends_the_children_still_running() -> None:
    closing = Launcher()
    sleeper = child(closing, "sleep", "600", stdio=(subprocess.DEVNULL, subprocess.PIPE, None))
    assert sleeper.stdout is not None
    sleeper.stdout.readline()
    sleeper.stdout.close()
    closing.close()  # what happens at the end of a test run, the handle still held
    assert until_gone(sleeper.pid)
    assert not closing.alive()


def test_a_child_whose_handle_is_dropped_is_killed(own: Launcher) -> None:
    sleeper = child(own, "sleep", "600", stdio=(subprocess.DEVNULL, subprocess.PIPE, None))
    assert sleeper.stdout is not None
    sleeper.stdout.readline()
    sleeper.stdout.close()
    pid = sleeper.pid
    del sleeper
    gc.collect()
    assert until_gone(pid)
    assert own.alive()


_STARTER = """
import os, subprocess, sys, time
from undogate.testing.launcher import Launcher
started = Launcher()
sleeper = started.launch(
    [sys.executable, "-m", "tests.launched_child", "sleep", "600"], dict(os.environ),
    os.getcwd(), (subprocess.DEVNULL, subprocess.PIPE, None), text=True,
    start_new_session=False,
)
sleeper.stdout.readline()
print(started.process.pid, sleeper.pid, flush=True)
time.sleep(600)
"""


def test_the_launcher_and_its_children_end_with_the_process_that_started_it() -> None:
    starter = subprocess.Popen(
        [sys.executable, "-c", _STARTER], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert starter.stdout is not None
        launcher_pid, child_pid = map(int, starter.stdout.readline().split())
        assert not gone(launcher_pid) and not gone(child_pid)
        starter.kill()  # a test worker that dies, say
        starter.wait(timeout=15)
        assert until_gone(child_pid), "the launched child outlived its launcher's starter"
        assert until_gone(launcher_pid), "the launcher outlived the process that started it"
    finally:
        starter.kill()
        starter.wait(timeout=15)
        if starter.stdout:
            starter.stdout.close()


def test_the_cli_says_its_name_as_a_fresh_interpreter_does() -> None:
    launched = launcher.run([*CLI, "nosuch"])
    fresh = subprocess.run([*CLI, "nosuch"], capture_output=True, text=True, check=False)
    assert launched.returncode == fresh.returncode == 2
    assert launched.stderr == fresh.stderr
    assert "python -m undogate.cli" in launched.stderr


def test_popen_forks_undogate_and_starts_anything_else_as_a_subprocess(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    quiet = subprocess.DEVNULL
    forked = launcher.popen([*CLI, "--version"], stdout=quiet, stderr=quiet)
    assert isinstance(forked, Launched)
    assert forked.wait(timeout=15) == 0
    # An interpreter setting read once at start-up would be lost in a fork.
    warned = launcher.popen([*CLI, "--version"], env={**os.environ, "PYTHONWARNINGS": "error"})
    assert isinstance(warned, subprocess.Popen)
    assert warned.wait(timeout=60) == 0
    other = launcher.popen(["true"])
    assert isinstance(other, subprocess.Popen)
    assert other.wait(timeout=15) == 0
    monkeypatch.setenv(launcher.DISABLE_ENV, "0")
    plain = launcher.popen([*CLI, "--version"], stdout=quiet, stderr=quiet)
    assert isinstance(plain, subprocess.Popen)
    assert plain.wait(timeout=60) == 0
