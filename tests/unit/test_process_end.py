"""How an ocat process ends (ocat.process_end): what a normal exit does that matters still
happens (threads finish, exit handlers run, output is flushed, the exit code is kept), and
Python's teardown of every module, which took 0.4-0.5 s of an --ask, does not."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent("""
    import atexit, sys, threading, time
    from pathlib import Path
    from ocat.process_end import run_and_end

    out = Path(sys.argv[1])
    how = sys.argv[2]

    class TornDown:
        def __del__(self):  # runs only in Python's own teardown
            (out / "torn-down").write_text("yes")

    kept = TornDown()

    def main():
        atexit.register(lambda: (out / "exit-handler").write_text("ran"))
        def late():
            time.sleep(0.3)
            (out / "thread").write_text("finished")
        threading.Thread(target=late).start()
        print("printed, not yet flushed", end="")
        if how == "raise":
            raise RuntimeError("a bug")
        if how == "usage":
            raise SystemExit(2)
        if how == "interrupt":
            raise KeyboardInterrupt
        return 3

    run_and_end(main)
""")


@pytest.mark.slow
@pytest.mark.parametrize(("how", "code"), [("return", 3), ("usage", 2), ("interrupt", 130), ("raise", 1)])
def test_a_command_ends_without_teardown_but_loses_nothing(tmp_path: Path, how: str, code: int) -> None:
    script = tmp_path / "command.py"
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(script), str(tmp_path), how], capture_output=True, text=True, timeout=60)
    assert done.returncode == code, done.stderr
    assert done.stdout == "printed, not yet flushed"
    assert (tmp_path / "thread").read_text() == "finished"  # a thread that is not a daemon was waited for
    assert (tmp_path / "exit-handler").read_text() == "ran"
    assert not (tmp_path / "torn-down").exists()  # the interpreter's teardown was skipped
    if how == "raise":
        assert "RuntimeError: a bug" in done.stderr  # an uncaught error still shows its traceback


def test_at_exit_a_derived_file_holds_its_log_and_a_deleted_one_is_not_made_again(tmp_path: Path) -> None:
    import sqlite3

    from ocat.memory.storage import derived

    kept, gone = tmp_path / "kept.sqlite3", tmp_path / "gone.sqlite3"
    # Held here: a connection dropped is closed whenever the garbage collector runs (its statement
    # cache makes a cycle), and its close would fold and delete the -wal file this test looks for.
    left_open = []
    for path in (kept, gone):
        db = sqlite3.connect(path)
        left_open.append(db)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE t (x)")
        db.execute("INSERT INTO t VALUES (1)")
        db.commit()
        derived.checkpoint_at_exit(str(path))
        # left open, as a process ending without teardown leaves it: the rows are in the -wal file
    gone.unlink()
    derived._checkpoint_all()
    assert Path(f"{kept}-wal").stat().st_size == 0  # folded into the file itself
    assert not gone.exists()
    for db in left_open:
        db.close()
