"""Issue 23, break 6: a lock file that cannot be created is one clear error at once, never a wait.

filelock reads a create that fails with ENOENT as contention and retries it; ocat used to say
"waiting for the store ... another ocat process holds it" and wait ten minutes for nobody.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ocat.errors import StoreError
from ocat.memory.sharing.owner_lock import acquire
from tests.support.cli import Cli


def test_a_lock_file_that_cannot_be_created_fails_at_once() -> None:
    notes: list[str] = []
    with pytest.raises(StoreError, match=r"cannot create the store's lock file /proc/self/\.ocat-owner\.lock"):
        acquire(Path("/proc/self"), serve=False, wait_seconds=30, notify=notes.append)
    assert notes == []  # nothing said of waiting


@pytest.mark.slow
@pytest.mark.parametrize("where", ["/proc/self", "/proc/self/ocat-store"])
def test_the_cli_says_why_at_once_instead_of_waiting(cli: Cli, where: str) -> None:
    # The old code waited up to 10 minutes here: the subprocess' time limit (180 s) fails it.
    run = cli("--vector-store-stats", env={"OCAT_VECTOR_STORE_PATH": where})
    assert run.returncode == 1
    assert "waiting" not in run.stderr and "holds it" not in run.stderr
    assert run.stderr.startswith("ocat: cannot ") and "No such file or directory" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_store_under_a_regular_file_is_refused_at_once(cli: Cli, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    run = cli("--query-vector-store", "anything", env={"OCAT_VECTOR_STORE_PATH": str(blocker / "store")})
    assert run.returncode == 1 and "Not a directory" in run.stderr and "waiting" not in run.stderr
