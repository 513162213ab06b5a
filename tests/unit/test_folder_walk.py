"""Walking a knowledge folder that fights back: link loops, great depth, unreadable parts.

Unreadable parts are simulated by making `os.scandir` (or a file's read) fail for one path:
tests may run as root, for whom `chmod 000` blocks nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ocat.text.chunking import ChunkingSettings
from ocat.memory import MemoryStore, add_path
from ocat.memory.ingest.folders import folder_files
from tests.support.warm_start import python_command
from tests.support.cli import Cli

OPTIONS = ChunkingSettings(
    strategy="semantic", chunk_size=200, chunk_overlap=20, max_chunk_size=300, preserve_sentence_boundaries=True
)


def stored_files(store: MemoryStore) -> list[str]:
    return sorted(m["source_file"] for _, m in store.iter_metadata("document"))


def deny_listing(monkeypatch: pytest.MonkeyPatch, *folders: Path) -> None:
    """os.scandir refuses these folders, as it would a chmod 000 folder for a normal user."""
    real = os.scandir
    denied = {str(f) for f in folders}

    def scandir(path: Any = ".") -> Any:
        if str(path) in denied:
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)


def deny_reading(monkeypatch: pytest.MonkeyPatch, *files: Path) -> None:
    """These files cannot be opened, as a chmod 000 file for a normal user."""
    real = Path.read_bytes
    denied = {str(f) for f in files}

    def read_bytes(self: Path) -> bytes:
        if str(self) in denied:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)


def test_a_link_loop_adds_each_note_once_and_adding_again_changes_nothing(store: MemoryStore, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    (notes / "sub").mkdir(parents=True)
    (notes / "a.md").write_text("## A\n\nThe first note.\n")
    (notes / "sub" / "b.md").write_text("## B\n\nThe second note.\n")
    (notes / "loop").symlink_to(".")  # notes/loop/loop/... for ever
    (notes / "sub" / "up").symlink_to("..")
    (notes / "z-copy.md").symlink_to("a.md")  # the same file under a second name
    (notes / "broken.md").symlink_to("nowhere.md")
    (notes / "ring-a").symlink_to("ring-b")  # a loop of links with no folder behind it
    (notes / "ring-b").symlink_to("ring-a")

    first = add_path(store, notes, OPTIONS)
    assert [Path(r.source_path).name for r in first.files] == ["a.md", "b.md"]
    assert stored_files(store) == ["a.md", "sub/b.md"]  # each under its own name, not loop/... or z-copy.md
    before = store.count("document")

    again = add_path(store, notes, OPTIONS)
    assert again.added_chunks == 0 and again.removed_chunks == 0 and again.replaced_chunks == 0
    assert store.count("document") == before and stored_files(store) == ["a.md", "sub/b.md"]


def test_a_folder_reached_only_through_links_is_named_by_the_first_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "note.txt").write_text("Kept elsewhere.\n")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "b-link").symlink_to(outside)
    (notes / "a-link").symlink_to(outside)
    (notes / "real").mkdir()
    (notes / "real" / "c-link").symlink_to(notes / "real")  # a link back to a folder walked already
    assert folder_files(notes).files == [notes / "a-link" / "note.txt"]


def test_a_folder_1100_levels_deep_is_walked_without_recursion(store: MemoryStore, tmp_path: Path) -> None:
    notes = tmp_path / "deep"
    notes.mkdir()
    levels = [notes]
    for _ in range(1100):  # one level at a time: mkdir(parents=True) is itself recursive
        levels.append(levels[-1] / "d")
        levels[-1].mkdir()
    try:
        (levels[-1] / "bottom.md").write_text("## Bottom\n\nThe deepest note of all.\n")
        (notes / "top.md").write_text("## Top\n\nThe shallowest note.\n")
        assert sys.getrecursionlimit() < 1100 * 2  # deep enough that a recursive walk would fail
        outcome = add_path(store, notes, OPTIONS)
        assert len(outcome.files) == 2
        assert stored_files(store) == ["d/" * 1100 + "bottom.md", "top.md"]
    finally:
        # pytest's own clean-up (shutil.rmtree) recurses too: take the tree down here, bottom up.
        (levels[-1] / "bottom.md").unlink(missing_ok=True)
        for level in reversed(levels[1:]):
            level.rmdir()


def test_the_walk_order_is_sorted_whatever_the_listing_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    notes = tmp_path / "notes"
    for name in ("b", "a", "c"):
        (notes / name).mkdir(parents=True)
        (notes / name / "n.md").write_text(name)
    real = os.scandir

    class Reversed:
        def __init__(self, path: Any) -> None:
            self.inner = real(path)

        def __enter__(self) -> Any:
            return sorted(self.inner, key=lambda e: e.name, reverse=True)

        def __exit__(self, *exc: object) -> None:
            self.inner.close()

    monkeypatch.setattr(os, "scandir", Reversed)
    assert folder_files(notes).files == [notes / n / "n.md" for n in ("a", "b", "c")]


def test_an_unreadable_subfolder_is_skipped_with_a_warning_and_its_chunks_kept(
    store: MemoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notes = tmp_path / "notes"
    (notes / "locked").mkdir(parents=True)
    (notes / "open.md").write_text("## Open\n\nAnyone may read this.\n")
    (notes / "locked" / "secret.md").write_text("## Secret\n\nOnly some may read this.\n")
    add_path(store, notes, OPTIONS)
    assert stored_files(store) == ["locked/secret.md", "open.md"]

    (notes / "new.md").write_text("## New\n\nAdded later.\n")
    deny_listing(monkeypatch, notes / "locked")
    warnings: list[str] = []
    outcome = add_path(store, notes, OPTIONS, notify=warnings.append)
    assert warnings == [(f"cannot read the folder {notes / 'locked'}: Permission denied; skipped "
                         "(what was added from it before is kept)")]
    assert outcome.removed_chunks == 0  # unreadable is not gone
    assert stored_files(store) == ["locked/secret.md", "new.md", "open.md"]


def test_an_unreadable_file_is_skipped_with_a_warning_and_the_rest_added(
    store: MemoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("## A\n\nReadable.\n")
    (notes / "b.md").write_text("## B\n\nNot readable next time.\n")
    add_path(store, notes, OPTIONS)
    (notes / "c.md").write_text("## C\n\nAlso readable.\n")
    deny_reading(monkeypatch, notes / "b.md")
    warnings: list[str] = []
    outcome = add_path(store, notes, OPTIONS, notify=warnings.append)
    assert warnings == [f"cannot read {notes / 'b.md'}: Permission denied; skipped (what was added from it before is kept)"]
    assert len(outcome.files) == 2 and outcome.removed_chunks == 0
    assert stored_files(store) == ["a.md", "b.md", "c.md"]


def test_an_unreadable_folder_itself_is_a_clear_error(store: MemoryStore, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from ocat.errors import InputFileError

    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("x")
    deny_listing(monkeypatch, notes)
    with pytest.raises(InputFileError, match="cannot read .*notes: Permission denied"):
        add_path(store, notes, OPTIONS)
    assert store.count("document") == 0


# A stand-in for `python -m ocat` in which one folder and one file cannot be read, for a
# subprocess test that works as root too (chmod 000 blocks nothing for root).
DENYING_OCAT = """
import os, pathlib, runpy, sys
locked, unreadable = sys.argv.pop(1), sys.argv.pop(1)
real_scandir, real_read = os.scandir, pathlib.Path.read_bytes
def scandir(path="."):
    if str(path) == locked:
        raise PermissionError(13, "Permission denied", str(path))
    return real_scandir(path)
def read_bytes(self):
    if str(self) == unreadable:
        raise PermissionError(13, "Permission denied", str(self))
    return real_read(self)
os.scandir, pathlib.Path.read_bytes = scandir, read_bytes
sys.argv[0] = "ocat"
runpy.run_module("ocat", run_name="__main__")
"""


def test_cli_warns_on_stderr_for_what_it_cannot_read_and_adds_the_rest(cli: Cli, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    (notes / "locked").mkdir(parents=True)
    (notes / "locked" / "hidden.md").write_text("## Hidden\n\nNever read.\n")
    (notes / "a.md").write_text("## A\n\nThe kettle is descaled on Mondays.\n")
    (notes / "b.md").write_text("## B\n\nCannot be read.\n")
    (notes / "loop").symlink_to(".")
    env = {**os.environ, "OCAT_VECTOR_STORE_PATH": str(cli.store_path)}
    run = subprocess.run(
        python_command("-c", DENYING_OCAT, str(notes / "locked"), str(notes / "b.md"),
                       "--add-to-vector-store", str(notes), "--output", "json", env=env),
        capture_output=True, text=True, env=env, cwd=cli.home, timeout=180,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["result"]["files"] == 1
    assert f"ocat: warning: cannot read the folder {notes / 'locked'}: Permission denied; skipped" in run.stderr
    assert f"ocat: warning: cannot read {notes / 'b.md'}: Permission denied; skipped" in run.stderr
    assert "Traceback" not in run.stderr


def test_vdoc_reports_what_it_could_not_read_in_its_result(
    store: MemoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ocat.commands import run_command
    from ocat.config.loading import load_settings
    from ocat.chat.session import ChatSession

    notes = tmp_path / "notes"
    (notes / "locked").mkdir(parents=True)
    (notes / "locked" / "x.md").write_text("## X\n\nNever read.\n")
    (notes / "a.md").write_text("## A\n\nRead.\n")
    (notes / "loop").symlink_to(".")
    deny_listing(monkeypatch, notes / "locked")
    result = run_command(ChatSession(load_settings(env={}), store=store), f"/vdoc {notes}")
    assert not result.error, result.text
    assert f"cannot read the folder {notes / 'locked'}: Permission denied; skipped" in result.text
    assert stored_files(store) == ["a.md"]
