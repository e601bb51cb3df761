"""The third-party servers' environments are made once, remade when their pin changes or an
install was cut short, and an install that overruns its budget fails with what it printed."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from . import server_envs
from .server_envs import STAMP_NAME


def installer(place: Path, calls: list[str]) -> server_envs.Installer:
    """An install that records itself and leaves a file, through the real command runner."""

    def install(run: Callable[[list[str]], None]) -> None:
        calls.append("install")
        place.mkdir()
        run(["touch", str(place / "installed-file")])

    return install


def test_an_environment_is_made_once_and_remade_when_its_pin_changes(tmp_path: Path) -> None:
    place, calls = tmp_path / ".venv-example", list[str]()
    server_envs._made_once(place, "example==1.0", installer(place, calls))
    server_envs._made_once(place, "example==1.0", installer(place, calls))
    assert calls == ["install"]
    assert (place / STAMP_NAME).read_text() == "example==1.0"
    (place / "left-by-the-old-version").touch()
    server_envs._made_once(place, "example==2.0", installer(place, calls))
    assert calls == ["install", "install"]
    assert (place / STAMP_NAME).read_text() == "example==2.0"
    assert not (place / "left-by-the-old-version").exists()  # started over, not layered


def test_an_install_cut_short_leaves_no_stamp_and_the_next_one_starts_over(
    tmp_path: Path,
) -> None:
    place, calls = tmp_path / ".venv-example", list[str]()

    def failing(run: Callable[[list[str]], None]) -> None:
        place.mkdir()
        (place / "half-installed").touch()
        run(["false"])

    with pytest.raises(RuntimeError, match="false failed"):
        server_envs._made_once(place, "example==1.0", failing)
    assert not (place / STAMP_NAME).exists()
    server_envs._made_once(place, "example==1.0", installer(place, calls))
    assert calls == ["install"]
    assert not (place / "half-installed").exists()


def test_a_step_that_overruns_the_budget_fails_with_its_output(tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="install budget") as caught:
        server_envs._run(["sh", "-c", "echo fetching; exec sleep 30"], deadline=started + 0.5)
    assert time.monotonic() - started < 10
    assert "fetching" in str(caught.value)
