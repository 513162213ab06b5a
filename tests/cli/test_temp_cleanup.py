"""A test run's temporary files in memory come back: a run interrupted with Ctrl+C removes its
folder, and a run killed before its end is swept by the next run, which leaves a run still
going alone (tests/support/memory_temp.py; seen: an interrupted run left 374 MB in /dev/shm).

Each test runs pytest itself, with the suite's own hooks, on a test that writes to its
tmp_path and waits; the in-memory folder is put under the test's tmp_path (OCAT_TESTS_SHM)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.paths import REPO
from tests.support.memory_temp import SHM_VARIABLE

# The suite's hooks, and only them (no autouse fixture: the waiting test needs no home or model).
INNER_CONFTEST = """
import tests.conftest as suite

for name in ("pytest_configure", "pytest_sessionstart", "pytest_sessionfinish"):
    if hasattr(suite, name):
        globals()[name] = getattr(suite, name)
"""
INNER_TEST = """
import os
import time
from pathlib import Path


def test_holds_memory(tmp_path):
    (tmp_path / f"{os.environ['CLEANUP_TEST_NAME']}.bin").write_bytes(b"x" * (1 << 20))
    Path(os.environ["CLEANUP_TEST_READY"]).write_text(str(tmp_path))
    if os.environ.get("CLEANUP_TEST_WAIT"):
        time.sleep(120)
"""


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    """The pytest processes a test starts; any still running at its end (a failed test) is killed."""
    runs: list[subprocess.Popen[bytes]] = []
    yield runs
    for run in runs:
        if run.poll() is None:
            run.kill()
            run.wait()


def start_run(
    started: list[subprocess.Popen[bytes]], where: Path, shm: Path, name: str, *, wait: bool
) -> tuple[subprocess.Popen[bytes], Path]:
    """pytest started on the waiting test (or one that ends at once), its in-memory folder under `shm`."""
    folder = where / name
    folder.mkdir()
    (folder / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (folder / "conftest.py").write_text(INNER_CONFTEST, encoding="utf-8")
    (folder / "test_inner.py").write_text(INNER_TEST, encoding="utf-8")
    ready = folder / "ready"
    env = {key: value for key, value in os.environ.items() if key != "TMPDIR"}
    env |= {SHM_VARIABLE: str(shm), "CLEANUP_TEST_READY": str(ready), "CLEANUP_TEST_NAME": name, "PYTHONPATH": str(REPO)}
    if wait:
        env["CLEANUP_TEST_WAIT"] = "1"
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_inner.py"],
        cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
    )
    started.append(run)
    return run, ready


def held_folder(run: subprocess.Popen[bytes], ready: Path) -> Path:
    """The inner test's tmp_path, once it has written there."""
    deadline = time.monotonic() + 60
    while not (ready.is_file() and ready.read_text(encoding="utf-8")):
        assert run.poll() is None, run.communicate()[0].decode()
        assert time.monotonic() < deadline, "the inner run never started its test"
        time.sleep(0.1)
    return Path(ready.read_text(encoding="utf-8"))


def runs_in(shm: Path) -> list[Path]:
    """The pytest folders of runs left in the in-memory folder (not pytest's `pytest-current` link)."""
    return sorted(p for p in shm.glob("ocat-tests-*/pytest-of-*/pytest-*") if not p.is_symlink())


@pytest.mark.slow
def test_ctrl_c_gives_the_runs_memory_back(tmp_path: Path, started: list[subprocess.Popen[bytes]]) -> None:
    shm = tmp_path / "shm"
    shm.mkdir()
    run, ready = start_run(started, tmp_path, shm, "interrupted", wait=True)
    held = held_folder(run, ready)
    assert held.is_relative_to(shm) and (held / "interrupted.bin").is_file()

    run.send_signal(signal.SIGINT)
    output = run.communicate(timeout=60)[0].decode()

    assert run.returncode == pytest.ExitCode.INTERRUPTED, output
    assert runs_in(shm) == [], output


def written(shm: Path, name: str) -> list[Path]:
    """The files the run called `name` wrote that are still in the in-memory folder."""
    return sorted(shm.rglob(f"{name}.bin"))


@pytest.mark.slow
def test_a_run_killed_before_its_end_is_swept_by_the_next_and_a_running_one_is_not(
    tmp_path: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    shm = tmp_path / "shm"
    shm.mkdir()
    killed, ready = start_run(started, tmp_path, shm, "killed", wait=True)
    held_folder(killed, ready)
    killed.kill()  # no hook runs: its folder stays
    killed.wait(timeout=30)
    assert len(written(shm, "killed")) == 1

    going, ready = start_run(started, tmp_path, shm, "going", wait=True)
    held_folder(going, ready)
    assert written(shm, "killed") == [], "the next run did not sweep the killed run's folder"

    later, ready = start_run(started, tmp_path, shm, "later", wait=False)
    output = later.communicate(timeout=60)[0].decode()
    assert later.returncode == 0, output
    assert len(written(shm, "going")) == 1, "a run still going lost its folder"
    assert written(shm, "later") == []  # it passed: its folder went at its end

    going.send_signal(signal.SIGINT)
    going.communicate(timeout=60)
    assert runs_in(shm) == []
