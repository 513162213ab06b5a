"""The test run's temporary files in memory (/dev/shm), and giving that memory back: at the end
of a run that passed or was interrupted, and, for a run that never reached its end (killed, or
a second Ctrl+C), at the start of the next run.

tests/conftest.py calls these from its hooks; tests/cli/test_temp_cleanup.py runs pytest itself,
interrupts it and kills it, to prove the memory comes back.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

# Room the in-memory folder must have for the suite's temporary files: a whole run's stores,
# homes and big inputs came to 4.0 GB (removed at the end of a run that passes), and this
# leaves as much again.
MEMORY_TEMP_BYTES = 8 << 30
# Where the in-memory folder goes; tests/cli/test_temp_cleanup.py points a run of its own elsewhere.
SHM_VARIABLE = "OCAT_TESTS_SHM"
# Written in a run's pytest folder while the run is under way: the pid of the process that owns it.
RUNNING = ".ocat-run"


def temporary_files_in_memory() -> Path | None:
    """Put every temporary file of the run (tmp_path, the homes, `tempfile`, the ocat processes'
    stores) on /dev/shm when it is a roomy tmpfs and TMPDIR names no folder of the user's choice,
    after taking away what earlier runs that never ended left there. The folder, or None when
    the files stay where they were.

    The stores commit to SQLite, which syncs each commit to disk: on a disk shared with other
    work, waiting for those syncs took about half the time of the store tests. A test that
    kills a process mid-write proves the same on tmpfs (a killed process loses no written page
    either way; only a power cut would). pytest-xdist's workers inherit TMPDIR from the process
    that starts them, which runs this first."""
    if os.environ.get("TMPDIR"):
        return None
    shm = Path(os.environ.get(SHM_VARIABLE) or "/dev/shm")
    try:
        if shutil.disk_usage(shm).free < MEMORY_TEMP_BYTES:
            return None
        folder = shm / f"ocat-tests-{os.getuid()}"
        folder.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        return None
    sweep_unfinished(folder)
    os.environ["TMPDIR"] = str(folder)
    tempfile.tempdir = None  # read again from TMPDIR
    return folder


def mark_running(basetemp: Path) -> None:
    """Say that this process's run is under way in `basetemp` (pytest's folder for the run)."""
    (basetemp / RUNNING).write_text(str(os.getpid()), encoding="utf-8")


def finished(basetemp: Path, *, passed: bool, interrupted: bool) -> None:
    """A run that passed or was interrupted gives its folder's memory back; a failed run's stays
    for a look (pytest keeps the last 3 runs' folders), no longer marked as under way."""
    if passed or interrupted:
        shutil.rmtree(basetemp, ignore_errors=True)
    else:
        (basetemp / RUNNING).unlink(missing_ok=True)


def sweep_unfinished(folder: Path) -> list[Path]:
    """Remove the pytest folders under `folder` whose run never reached its end: marked as under
    way by a process that is gone. Runs still going (other worktrees share the folder) and
    failed runs kept for a look are left alone. The folders removed."""
    removed = []
    for run in sorted(folder.glob(f"pytest-of-*/pytest-*/{RUNNING}")):
        try:
            pid = int(run.read_text(encoding="utf-8").strip())
        except (OSError, ValueError):
            continue
        if not _alive(pid):
            shutil.rmtree(run.parent, ignore_errors=True)
            removed.append(run.parent)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True
