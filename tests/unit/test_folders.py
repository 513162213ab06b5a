"""Knowledge folders: markdown chunked by section, metadata from paths, re-adding keeps memory in step."""

from __future__ import annotations

from pathlib import Path

from ocat.text.chunking import ChunkingSettings
from ocat.memory import MemoryStore, add_path
from ocat.memory.ingest.folders import FOLDER_MARKDOWN, path_metadata
from tests.support.cli import Cli
from tests.support.fakes import FakeEmbedder

OPTIONS = ChunkingSettings(
    strategy="semantic", chunk_size=200, chunk_overlap=20, max_chunk_size=300, preserve_sentence_boundaries=True
)
PLAN = """# ACME session 42

Kick-off notes for the session.

## Goals

Migrate the billing ledger to PostgreSQL 16 before the end of the quarter.

## Open Risks

The payment gateway may time out during the cutover window.
"""


def make_folder(root: Path) -> Path:
    notes = root / "notes"
    (notes / "ACME-OCD-042").mkdir(parents=True)
    (notes / "BETA-OCD-7" / "drafts").mkdir(parents=True)
    (notes / ".archive").mkdir()
    (notes / "ACME-OCD-042" / "plan.md").write_text(PLAN)
    (notes / "BETA-OCD-7" / "drafts" / "idea.md").write_text("## Idea\n\nPasskeys for the mobile onboarding flow.\n")
    (notes / "coffee.txt").write_text("Descale the office coffee machine every month.\n")
    (notes / ".archive" / "old.md").write_text("## Old\n\nNothing to see.\n")
    (notes / "image.png").write_bytes(b"\x89PNG\x00")
    return notes


def chunks_of(store: MemoryStore) -> list[dict]:
    return [{**r.metadata, "text": r.text} for r in store.iter_records("document")]  # type: ignore[union-attr]


def test_session_folder_names_give_prefix_and_number(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    meta = path_metadata(folder, folder / "ACME-OCD-042" / "plan.md")
    assert meta["prefix"] == "ACME" and meta["ocd_number"] == 42 and meta["filename"] == "plan.md"
    assert meta["source_folder"] == str(folder.resolve())
    assert path_metadata(folder, folder / "ACME-OCD-1" / "sub" / "x-ocd-9" / "a.md")["prefix"] == "X"  # innermost
    assert "prefix" not in path_metadata(folder, folder / "ACME-OCD-" / "a.md")
    assert "prefix" not in path_metadata(folder, folder / "plan-ACME-OCD-042.md")  # folders only, not file names
    session = tmp_path / "Acme-ocd-007"
    assert path_metadata(session, session / "plan.md")["ocd_number"] == 7  # the folder added itself


def test_a_folder_is_chunked_by_section_with_metadata_from_paths(store: MemoryStore, tmp_path: Path) -> None:
    notes = make_folder(tmp_path)
    outcome = add_path(store, notes, OPTIONS)
    assert len(outcome.files) == 3  # hidden folder and non-text files skipped
    chunks = chunks_of(store)
    files = {c["source_file"] for c in chunks}
    assert files == {"ACME-OCD-042/plan.md", "BETA-OCD-7/drafts/idea.md", "coffee.txt"}
    plan = sorted((c for c in chunks if c["filename"] == "plan.md"), key=lambda c: c["chunk_index"])
    assert [c.get("section") for c in plan] == [None, "goals", "open risks"]
    assert all(c["prefix"] == "ACME" and c["ocd_number"] == 42 for c in plan)
    assert plan[1]["text"].startswith("ACME-OCD-042/plan.md\n## Goals\n\n")  # the file and heading lead the chunk
    assert plan[1]["source_path"] == str((notes / "ACME-OCD-042" / "plan.md").resolve())
    assert len({c["content_hash"] for c in plan}) == 1 and len(plan[0]["content_hash"]) == 64
    idea = next(c for c in chunks if c["filename"] == "idea.md")
    assert idea["prefix"] == "BETA" and idea["ocd_number"] == 7
    coffee = next(c for c in chunks if c["filename"] == "coffee.txt")
    assert "prefix" not in coffee and "section" not in coffee


def test_a_long_section_is_split_within_the_size_limits(store: MemoryStore, tmp_path: Path) -> None:
    folder = tmp_path / "kb"
    folder.mkdir()
    sentences = " ".join(f"Sentence {i} says something about deployment step {i}." for i in range(400))
    (folder / "runbook.md").write_text(f"## Short\n\nOne line.\n\n## Deploy\n\n{sentences}\n")
    add_path(store, folder, OPTIONS)
    chunks = chunks_of(store)
    deploy = [c for c in chunks if c.get("section") == "deploy"]
    assert len(deploy) >= 3
    assert all(len(c["text"]) <= FOLDER_MARKDOWN.max_chunk_size for c in deploy)
    assert all(c["text"].startswith("runbook.md\n## Deploy") for c in deploy)
    # Markdown in a folder is not cut to the configured 200 characters: a section stays whole.
    assert [c["text"] for c in chunks if c.get("section") == "short"] == ["runbook.md\n## Short\n\nOne line."]


def test_re_adding_embeds_only_what_changed_and_drops_deleted_files(tmp_path: Path) -> None:
    embedder = FakeEmbedder()
    from ocat.memory import StoreLocation

    store = MemoryStore.open(StoreLocation(path=tmp_path / "store"), embedder, name="test")
    notes = make_folder(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "coffee.txt").write_text("Another folder's coffee note.\n")
    add_path(store, notes, OPTIONS)
    add_path(store, other, OPTIONS)
    before = len(chunks_of(store))

    embedder.calls.clear()
    again = add_path(store, notes, OPTIONS)
    assert again.added_chunks == 0 and again.removed_chunks == 0 and embedder.calls == []

    (notes / "coffee.txt").write_text("Descale the coffee machine every two weeks.\n")
    (notes / "BETA-OCD-7" / "drafts" / "idea.md").unlink()
    embedder.calls.clear()
    changed = add_path(store, notes, OPTIONS)
    assert changed.added_chunks == 1 and changed.replaced_chunks == 1 and changed.removed_chunks == 1
    assert sum(embedder.calls) == 1  # only the edited file was embedded
    chunks = chunks_of(store)
    assert len(chunks) == before - 1
    assert not any(c["filename"] == "idea.md" for c in chunks)
    # The other folder's file of the same name was never touched.
    assert any(c["text"] == "Another folder's coffee note." for c in chunks)
    assert "every two weeks" in next(c["text"] for c in chunks if c["source_folder"] == str(notes.resolve())
                                     and c["filename"] == "coffee.txt")


def test_chunks_stored_before_folders_had_metadata_are_replaced(store: MemoryStore, tmp_path: Path) -> None:
    from ocat.memory import add_text

    notes = make_folder(tmp_path)
    plan = notes / "ACME-OCD-042" / "plan.md"
    # What an older ocat stored for this file: the absolute path as source_file, no folder fields.
    add_text(store, PLAN, OPTIONS, source="cli", source_file=str(plan.resolve()), manual_entry=False)
    add_path(store, notes, OPTIONS)
    plan_chunks = [c for c in chunks_of(store) if "plan.md" in c["source_file"]]
    assert {c["source_file"] for c in plan_chunks} == {"ACME-OCD-042/plan.md"}
    assert len(plan_chunks) == 3


def test_a_title_alone_is_no_chunk_of_a_note(store: MemoryStore, tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "project.md").write_text("# Bridge project\n\n## Goals\n\nOpen the bridge by May.\n\n## Later\n")
    add_path(store, notes, OPTIONS)
    assert [c["text"] for c in chunks_of(store)] == ["project.md\n## Goals\n\nOpen the bridge by May."]


def test_a_single_file_keeps_the_configured_chunking(store: MemoryStore, tmp_path: Path) -> None:
    file = tmp_path / "plan.md"
    file.write_text(PLAN)
    add_path(store, file, OPTIONS)
    chunks = chunks_of(store)
    assert all(c["source_file"] == str(file.resolve()) == c["source_path"] for c in chunks)
    assert all(c["filename"] == "plan.md" and "prefix" not in c for c in chunks)


def test_cli_folder_ingest_and_where_filters(cli: Cli, tmp_path: Path) -> None:
    notes = make_folder(tmp_path)
    added = cli("--add-to-vector-store", str(notes), "--output", "json")
    assert added.returncode == 0, added.stderr
    assert added.json()["result"]["files"] == 3
    assert added.stderr.count("adding ") == 3
    # Added again unchanged: no file is being added, and none is named as if it were.
    unchanged = cli("--add-to-vector-store", str(notes))
    assert unchanged.returncode == 0 and "Added 0 chunks" in unchanged.stdout
    assert "adding" not in unchanged.stderr, unchanged.stderr

    def results(*args: str) -> list[dict]:
        run = cli("--query-vector-store", "what are the goals and risks", "--results", "10", "--output", "json", *args)
        assert run.returncode == 0, run.stderr
        return run.json()["result"]["results"]

    assert {h["metadata"].get("section") for h in results("--where", "prefix=acme")} == {None, "goals", "open risks"}
    assert all(h["metadata"]["prefix"] == "ACME" for h in results("--where", "prefix=ACME"))
    goals = results("--where", "prefix=ACME", "--where", "section=Goals")
    assert len(goals) == 1 and "PostgreSQL" in goals[0]["text"]
    assert [h["metadata"]["filename"] for h in results("--where", "ocd_number=007")] == ["idea.md"]
    assert [h["metadata"]["filename"] for h in results("--where", "source_file=coffee.txt")] == ["coffee.txt"]
    assert results("--where", "kind=exchange") == []
    assert len(results("--where", "date>=2000-01-01")) == 5
    assert results("--where", "date<2000-01-01") == []
    assert all(h["metadata"].get("ocd_number") != 42 for h in results("--where", "ocd_number!=42"))

    (notes / "coffee.txt").unlink()
    again = cli("--add-to-vector-store", str(notes))
    assert again.returncode == 0 and "1 chunk of files no longer in the folder removed" in again.stdout

    malformed = cli("--query-vector-store", "x", "--where", "no-operator")
    assert malformed.returncode == 2 and "--where expects KEY=VALUE" in malformed.stderr
    bad_number = cli("--query-vector-store", "x", "--where", "ocd_number=forty-two")
    assert bad_number.returncode == 2 and "whole number" in bad_number.stderr
    not_a_query = cli("--add-to-vector-store", str(notes), "--where", "prefix=ACME")
    assert not_a_query.returncode == 2 and "--where applies to --query-vector-store only" in not_a_query.stderr
