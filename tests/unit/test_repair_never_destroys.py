"""Issue 34: no check, repair or damaged file deletes what the user kept (breaks A, C, D, F, G).

A. A note shortened by the user (`/vdelete doc-KEY-2`) is not "partial": a repair keeps it
   whole, and never reads a source label (`vadd_command`, `mcp`) as a file in the current folder.
C. An emptied or missing chroma.sqlite3 is damage, reported with a nonzero exit; the derived
   files are left as they are, and a repair stops unless the user accepts the smaller store.
D. A repair on a store whose titles live only in the lexical index (an older ocat's) keeps them.
F. A derived file that cannot be written costs export, stats and query nothing, and a write is
   stored in Chroma all the same.
G. With the prompt-vector file missing and no model here, export and stats still answer, and a
   repair without the model leaves the prompt file in place.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest

from ocat.memory import MemoryStore, StoreLocation
from ocat.memory.ingest.documents import partial_documents
from ocat.memory.ingest.finishing import Finished, finish_document
from ocat.memory.store_check import check_store
from ocat.memory.store_repair import repair_store
from ocat.memory.storage.export_import import export_memory
from ocat.memory.storage.thread_titles import TITLES_IN_STORE
from ocat.operations.add import add_note
from ocat.operations.lookup import delete_records
from ocat.operations.threads import rename_thread
from ocat.records import THREAD_TITLE_KEY, Exchange
from ocat.text.chunking import ChunkingSettings
from tests.support.cli import Cli, stats
from tests.support.fakes import FakeEmbedder
from tests.support.templates import StoreTemplates
from tests.unit.test_trust_derived import cli_store

CHUNKING = ChunkingSettings("semantic", 1000, 0, 1000, True)
# About 6,000 characters in seven paragraphs: seven chunks of a note.
LONG_NOTE = "\n\n".join(f"Paragraph {n} of the bridge survey: " + f"pier {n} shows scour on its east face. " * 22
                        for n in range(7))


def open_store(folder: Path, **options: Any) -> MemoryStore:
    return MemoryStore.open(StoreLocation(path=folder), FakeEmbedder(), name="test", **options)


def plain(folder: Path) -> MemoryStore:
    return open_store(folder, upkeep=False)


def finisher(store: MemoryStore, partial: Any) -> Finished:
    return finish_document(store, partial, CHUNKING)


def exported(store: MemoryStore) -> list[dict[str, Any]]:
    out = io.StringIO()
    export_memory(store, out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


# -- A: a shortened note, a note's source label ----------------------------------------------------


@pytest.mark.parametrize("source", ["vadd_command", "remember_command", "mcp", "model"])
def test_a_note_shortened_by_a_delete_is_whole_and_a_repair_keeps_every_chunk(
    tmp_path: Path, source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(tmp_path / "store")
    added = add_note(store, LONG_NOTE, CHUNKING, source=source)
    assert added.total_chunks == 7
    assert delete_records(store, [added.ids[2]]) == 1
    store.close()
    # A file named like the source label in the current folder is never taken for the note's file.
    (tmp_path / source).write_text("an unrelated file that must never become memory")
    monkeypatch.chdir(tmp_path)

    found = check_store(plain(tmp_path / "store"))
    assert found.partial_documents == [] and found.healthy, found.lines()
    done = repair_store(plain(tmp_path / "store"), finisher)
    assert done.after.healthy and done.kept_documents == [] and done.finished_documents == []
    reopened = open_store(tmp_path / "store")
    assert reopened.count("document") == 6
    assert not reopened.documents_where({"source_file": source}) and not reopened.documents_where({"source_path": source})


def test_a_file_document_shortened_by_a_delete_is_not_finished_again(tmp_path: Path) -> None:
    from ocat.memory import add_path

    notes = tmp_path / "survey.txt"
    notes.write_text(LONG_NOTE)
    store = open_store(tmp_path / "store")
    added = add_path(store, notes, CHUNKING)
    delete_records(store, [added.files[0].ids[3]])
    store.close()
    assert check_store(plain(tmp_path / "store")).healthy
    repair_store(plain(tmp_path / "store"), finisher)
    # The chunk the user deleted stays deleted: a repair brings nothing back that was taken out on purpose.
    assert open_store(tmp_path / "store").count("document") == 6


def _cut_short(folder: Path, notes: Path) -> list[str]:
    """A file's add cut short (a crash): only its first chunks are stored."""
    from ocat.memory.ingest.paths import file_chunks

    store = open_store(folder)
    chunks = file_chunks(notes, notes.read_text(), CHUNKING, source="cli")
    store.add_chunks(chunks[:4])
    store.close()
    return [c.id for c in chunks]


def test_a_file_cut_short_is_finished_from_its_unchanged_file(tmp_path: Path) -> None:
    notes = tmp_path / "survey.txt"
    notes.write_text(LONG_NOTE)
    ids = _cut_short(tmp_path / "store", notes)
    found = check_store(plain(tmp_path / "store"))
    assert [(p.file, p.stored_chunks, p.total_chunks) for p in found.partial_documents] == [(str(notes), 4, 7)]
    done = repair_store(plain(tmp_path / "store"), finisher)
    assert done.finished_documents == [str(notes)] and done.after.healthy
    assert sorted(open_store(tmp_path / "store").existing_ids("document", ids)) == sorted(ids)


@pytest.mark.parametrize("how", ["gone", "changed"])
def test_a_file_cut_short_whose_file_is_gone_or_changed_is_kept_as_it_is(tmp_path: Path, how: str) -> None:
    notes = tmp_path / "survey.txt"
    notes.write_text(LONG_NOTE)
    ids = _cut_short(tmp_path / "store", notes)
    if how == "gone":
        notes.unlink()
    else:
        notes.write_text("a different text now")
    done = repair_store(plain(tmp_path / "store"), finisher)
    assert done.finished_documents == [] and len(done.kept_documents) == 1
    assert f"(4 of 7 chunks): kept as it is: its file {'is gone' if how == 'gone' else 'has changed'}" in done.kept_documents[0]
    assert done.after.healthy, done.after.lines()
    # Not one chunk was deleted, and a second repair has nothing to do.
    store = open_store(tmp_path / "store")
    assert sorted(store.existing_ids("document", ids)) == sorted(ids[:4])
    assert partial_documents(store) == []


def test_a_the_chat_s_vadd_and_vdelete_then_check_and_repair_as_a_user_does(cli: Cli, tmp_path: Path) -> None:
    """The attack as reported: /vadd a long note, /vdelete one chunk, then --check-store and
    --repair-store, run from a folder that holds a file called `vadd_command`."""
    (cli.home / "vadd_command").write_text("an unrelated file that must never become memory")
    added = cli("--plain", "--dummy-mode", input=f"/vadd {' '.join(LONG_NOTE.split())}\n")
    assert added.returncode == 0, added.stderr
    ids = [line["id"] for line in cli("--export-memory", "-").json_lines() if line.get("kind") == "document"]
    assert len(ids) >= 5, ids
    deleted = cli("--plain", "--dummy-mode", input=f"/vdelete {ids[2]} --yes\n")
    assert deleted.returncode == 0 and "Deleted" in deleted.stdout, deleted.stdout + deleted.stderr
    checked = cli("--check-store")
    assert checked.returncode == 0 and "partial" not in checked.stdout, checked.stdout
    repaired = cli("--repair-store", "--output", "json")
    assert repaired.returncode == 0, repaired.stderr
    after = cli("--export-memory", "-").json_lines()
    assert sorted(line["id"] for line in after if line.get("kind") == "document") == sorted(ids[:2] + ids[3:])
    assert "unrelated" not in json.dumps(after)


# -- C: an emptied or missing chroma.sqlite3 ---------------------------------------------------


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.glob("ocat-*.sqlite3"))}


@pytest.fixture
def damaged_primary(cli: Cli, store_templates: StoreTemplates, request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    store_templates.copy_into(cli, "note-and-300-exchanges", cli_store)
    primary = cli.store_path / "chroma.sqlite3"
    if request.param == "emptied":
        primary.write_bytes(b"")
    else:
        primary.unlink()
    yield _digests(cli.store_path)


@pytest.mark.parametrize("damaged_primary", ["emptied", "missing"], indirect=True)
def test_c_an_emptied_or_missing_primary_file_is_damage_and_nothing_is_levelled_away(
    cli: Cli, damaged_primary: dict[str, str]
) -> None:
    for args in (["--vector-store-stats"], ["--query-vector-store", "spare key"], ["--export-memory", "-"],
                 ["--ask", "where is the key?", "--dummy-mode"]):
        run = cli(*args)
        # A read fails; a chat (--ask) answers without memory, and says why (memory never breaks a chat).
        assert (run.returncode == 0) == (args[0] == "--ask"), (args, run.stdout)
        assert "looks damaged" in run.stderr and "chroma.sqlite3" in run.stderr and "Traceback" not in run.stderr
        assert "--accept-smaller-store" in run.stderr
    checked = cli("--check-store", "--output", "json")
    assert checked.returncode == 4, checked.stderr
    assert checked.json()["result"]["healthy"] is False and checked.json()["result"]["shrunk"]
    assert "DAMAGED" in cli("--check-store").stdout
    refused = cli("--repair-store")
    assert refused.returncode == 1 and "--accept-smaller-store" in refused.stderr
    # Every command above left the derived files as they were: the traces of what the store held.
    assert _digests(cli.store_path) == damaged_primary
    assert not (cli.store_path / "chroma.sqlite3").exists() or (cli.store_path / "chroma.sqlite3").stat().st_size == 0
    accepted = cli("--repair-store", "--accept-smaller-store", "--output", "json")
    assert accepted.returncode == 0, accepted.stderr
    moved = accepted.json()["result"]["moved_aside"]
    assert len(moved) == 2 and all(Path(m).exists() for m in moved)
    assert cli("--check-store").returncode == 0 and stats(cli)["exchanges"] == 0


def test_c_a_primary_store_that_lost_records_stops_every_command(cli: Cli, store_templates: StoreTemplates) -> None:
    """Another client (or an older copy of chroma.sqlite3) took 200 of the 300 exchanges away."""
    import chromadb

    store_templates.copy_into(cli, "note-and-300-exchanges", cli_store)
    before = _digests(cli.store_path)
    collection = chromadb.PersistentClient(path=str(cli.store_path)).get_collection("default-exchanges")
    collection.delete(ids=collection.get(limit=200, include=[])["ids"])
    run = cli("--vector-store-stats")
    assert run.returncode == 1 and "Chroma holds 100 exchanges but the lexical index" in run.stderr
    assert _digests(cli.store_path) == before
    assert cli("--check-store").returncode == 4


# Pages counted from the file's end, past the header and the schema Chroma reads first. Which of
# them Chroma itself reads to list the records depends on the order the template's writes took:
# one it reads made the check fail as any command fails ("database disk image is malformed",
# exit 1: 13 and 14 of the last 24 pages of two templates), until the check named that damage too.
@pytest.mark.parametrize("page_from_end", [2, 3, 12, 20])
def test_c_check_store_reads_the_primary_file_s_pages(cli: Cli, store_templates: StoreTemplates,
                                                      page_from_end: int) -> None:
    store_templates.copy_into(cli, "note-and-300-exchanges", cli_store)
    primary = cli.store_path / "chroma.sqlite3"
    with primary.open("r+b") as handle:
        handle.seek(primary.stat().st_size - page_from_end * 4096)
        handle.write(b"\xff" * 4096)
    damaged = _digests(cli.store_path)
    checked = cli("--check-store", "--output", "json")
    assert checked.returncode == 4, checked.stderr
    found = checked.json()["result"]
    assert found["primary_damaged"] and not found["healthy"]
    # Chroma could not be read, or it could: the derived files are reported either way.
    assert {d["what"]: d["records"] for d in found["derived"]} == {
        "lexical index": {"exchange": 300, "document": 1}, "prompt vector file": {"exchange": 300}}
    said = cli("--check-store")
    assert said.returncode == 4 and "primary store: DAMAGED" in said.stdout
    assert _digests(cli.store_path) == damaged  # the check changed nothing


# -- D: titles only an older ocat's lexical index holds ------------------------------------------


def _older_store(folder: Path) -> None:
    """A store as the release before made it: the title in the lexical index alone."""
    store = open_store(folder)
    store.add_exchanges([Exchange(user_prompt=f"q{i}", assistant_response=f"a{i}", thread_id="kitchen",
                                  session_id="s", exchange_id=f"e{i}", timestamp=1_764_000_000.0 + i)
                         for i in range(5)])
    rename_thread(store, "kitchen", "Kitchen plan")
    store.exchanges.update(ids=[f"e{i}" for i in range(5)], metadatas=[{THREAD_TITLE_KEY: None}] * 5)
    with sqlite3.connect(store.lexical.path) as db:
        db.execute("DELETE FROM meta WHERE key = ?", (TITLES_IN_STORE,))
    store.close()
    store.lexical.close()
    store.prompts.close()


def test_d_a_repair_of_an_older_store_keeps_the_titles_its_index_alone_held(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    _older_store(folder)
    done = repair_store(plain(folder), finisher)
    assert any("thread title" in line for line in done.done), done.done
    titles = [line for line in exported(open_store(folder)) if line.get("kind") == "thread"]
    assert titles == [{"kind": "thread", "thread_id": "kitchen", "title": "Kitchen plan"}]


def test_d_the_titles_survive_a_repair_of_a_damaged_older_index_as_far_as_it_reads(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    _older_store(folder)
    # Orphans and a missing record: the index is rebuilt in place, and its titles carried first.
    with sqlite3.connect(folder / "ocat-lexical-test.sqlite3") as db:
        db.execute("DELETE FROM ids_exchange WHERE record_id = 'e1'")
    repair_store(plain(folder), finisher)
    assert open_store(folder).threads.titles(["kitchen"]) == {"kitchen": "Kitchen plan"}


# -- F: a derived file that cannot be written -------------------------------------------------


def _immutable(path: Path) -> None:
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not on this machine")
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot make a file immutable here: {done.stderr.strip()}")


@pytest.fixture
def immutable_index(cli: Cli, store_templates: StoreTemplates) -> Iterator[Path]:
    store_templates.copy_into(cli, "note-and-300-exchanges", cli_store)
    index = cli.store_path / "ocat-lexical-default.sqlite3"
    _immutable(index)
    yield index
    subprocess.run(["chattr", "-i", str(index)], check=False)


def test_f_an_unwritable_index_costs_writes_and_reads_nothing(cli: Cli, tmp_path: Path, immutable_index: Path) -> None:
    more = tmp_path / "more.jsonl"
    more.write_text(json.dumps({
        "kind": "exchange", "exchange_id": "late", "thread_id": "t2", "session_id": "s",
        "user_prompt": "where is the torch?", "assistant_response": "the torch is in the red box",
        "timestamp": 1_764_100_000.0, "prior_exchange_ids": [], "thread_session_id": "t2_s",
        "thread_continuation_seq": 0}) + "\n")
    imported = cli("--import-memory", str(more))
    assert imported.returncode == 0, imported.stderr
    assert str(immutable_index) in imported.stderr and "cannot write" in imported.stderr
    assert stats(cli)["exchanges"] == 301
    exported_lines = cli("--export-memory", "-")
    assert exported_lines.returncode == 0 and len(exported_lines.json_lines()) == 302
    query = cli("--query-vector-store", "where is the torch?", "--output", "json")
    assert query.returncode == 0 and "red box" in query.stdout, query.stderr
    repaired = cli("--repair-store")
    assert repaired.returncode in (1, 4) and "failed unexpectedly" not in repaired.stderr
    assert str(immutable_index) in repaired.stdout + repaired.stderr
    subprocess.run(["chattr", "-i", str(immutable_index)], check=True)
    # Once it can be written, the index catches up: the late exchange is found by its words too.
    assert cli("--check-store").returncode == 4
    assert cli("--repair-store").returncode == 0
    assert cli("--check-store").returncode == 0


# -- G: no prompt-vector file and no model -------------------------------------------------------


def test_g_stats_and_export_need_no_model_and_a_repair_without_it_keeps_the_prompt_file(
    cli: Cli, store_templates: StoreTemplates, tmp_path: Path
) -> None:
    store_templates.copy_into(cli, "note-and-300-exchanges", cli_store)
    prompts = cli.store_path / "ocat-prompts-default.sqlite3"
    no_model = {"OCAT_EMBEDDING_MODEL_PATH": str(tmp_path / "no-model-here")}
    repaired = cli("--repair-store", env=no_model)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert prompts.exists(), "a repair without the model must not take the prompt vectors away"
    prompts.unlink()
    for args in (["--vector-store-stats", "--output", "json"], ["--export-memory", "-"]):
        run = cli(*args, env=no_model)
        assert run.returncode == 0, run.stderr
        assert "download" not in run.stderr
    assert cli("--vector-store-stats", "--output", "json", env=no_model).json()["result"]["exchanges"] == 300
    # With the model back, the prompts are embedded again on the next open.
    assert stats(cli)["exchanges"] == 300 and prompts.exists()


class AbsentModel(FakeEmbedder):
    """An embedder whose model is not on this machine: embedding would fetch it."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[int] = []

    def ready(self) -> bool:
        return False

    def embed(self, texts: Any) -> list[list[float]]:
        self.asked.append(len(texts))
        return super().embed(texts)


def test_g_opening_without_the_model_embeds_nothing_and_an_open_with_it_catches_up(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    store = open_store(folder)
    store.add_exchanges([Exchange(user_prompt=f"q{i}", assistant_response=f"a{i}", thread_id="t",
                                  session_id="s", exchange_id=f"e{i}", timestamp=1.0 + i) for i in range(3)])
    store.close()
    store.prompts.close()
    store.lexical.close()
    (folder / "ocat-prompts-test.sqlite3").unlink()
    absent = AbsentModel()
    opened = MemoryStore.open(StoreLocation(path=folder), absent, name="test")
    assert absent.asked == [] and opened.prompts.count() == 0 and opened.count("exchange") == 3
    opened.close()
    opened.prompts.close()
    assert open_store(folder).prompts.count() == 3
