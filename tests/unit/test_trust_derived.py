"""Issue 23, break 4: a damaged derived file never blocks anything, and says it was rebuilt.

The lexical index and the prompt vectors are derived from Chroma. A half-truncated, bad-header
or page-damaged one made stats, query and export fail ("database disk image is malformed").
Now each is checked when opened and, if damaged, moved aside and rebuilt, with one line saying
so; damage met mid-search degrades that search to the vectors and is rebuilt on the next
turn; `--check-store` and `--repair-store` report and repair.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from ocat.memory import MemoryStore, StoreLocation, RetrievalLimits, retrieve
from ocat.memory.storage.export_import import export_memory
from ocat.records import DocumentChunk, Exchange
from ocat.operations.threads import rename_thread
from tests.support.cli import Cli, stats
from tests.support.fakes import FakeEmbedder
from tests.support.templates import StoreTemplates
from tests.unit.test_session import session_on

DAMAGES = ("truncated", "header", "page")
FILES = {"lexical": "ocat-lexical-test.sqlite3", "prompts": "ocat-prompts-test.sqlite3"}
LIMITS = RetrievalLimits(exchange_results=5, document_results=5, exchange_threshold=0.0, document_threshold=0.0)


def open_store(folder: Path, notes: list[str] | None = None) -> MemoryStore:
    return MemoryStore.open(StoreLocation(path=folder), FakeEmbedder(), name="test",
                            notify=notes.append if notes is not None else None)


def filled(folder: Path, exchanges: int = 400) -> MemoryStore:
    store = open_store(folder)
    store.add_exchanges(
        Exchange(user_prompt=f"question {i} about the garden shed and the ladder number {i}",
                 assistant_response=f"answer {i}: " + "the ladder hangs on the north wall " * 3,
                 thread_id=f"t{i % 7}", session_id="s", exchange_id=f"e{i:04d}", timestamp=1_764_000_000.0 + i)
        for i in range(exchanges)
    )
    store.add_chunks([DocumentChunk("doc-1", "the boiler manual says press reset twice", {"document_id": "d"})])
    rename_thread(store, "t3", "Garden")
    store.wait_for_passages()  # the tests below break files under the store: not under its backfill
    return store


def release(store: MemoryStore) -> None:
    """Close the derived files as a process ending would (SQLite folds its WAL into the file)."""
    store.lexical.close()
    store.prompts.close()


def damage(path: Path, how: str) -> None:
    """Damage an SQLite file the three ways the issue names."""
    size = path.stat().st_size
    with path.open("r+b") as handle:
        if how == "truncated":
            handle.truncate(size // 2)
        elif how == "header":
            handle.write(b"this is no sqlite header at all")
        else:  # a page in the middle, overwritten
            page = 4096
            handle.seek((size // page // 2) * page)
            handle.write(bytes(range(256)) * (page // 256))


def assert_damaged(path: Path) -> None:
    from ocat.memory.storage.derived import sqlite_problem

    assert sqlite_problem(path) is not None, "the damage must be one quick_check sees"


@pytest.fixture(scope="module")
def filled_and_closed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of 400 exchanges, filled once per test process and given up as a process ending
    would: each damage test breaks a copy of it (filling took ~1.2 s of each of six tests)."""
    folder = tmp_path_factory.mktemp("trust-derived") / "store"
    store = filled(folder)
    store.close()
    release(store)
    return folder


@pytest.mark.parametrize("which", FILES)
@pytest.mark.parametrize("how", DAMAGES)
def test_a_damaged_file_is_moved_aside_rebuilt_and_said(tmp_path: Path, filled_and_closed: Path, which: str,
                                                        how: str) -> None:
    folder = tmp_path / "store"
    shutil.copytree(filled_and_closed, folder)
    path = folder / FILES[which]
    damage(path, how)
    assert_damaged(path)
    notes: list[str] = []
    store = open_store(folder, notes)
    assert len(notes) == 1 and "was damaged" in notes[0] and "rebuilt from the store" in notes[0]
    assert list(folder.glob(f"{FILES[which]}.damaged-*"))
    assert store.count("exchange") == 400 and store.lexical.count("exchange") == 400
    assert store.prompts.count() == 400
    assert retrieve(store, "where does the ladder hang?", LIMITS)
    assert store.threads.titles(["t3"]) == {"t3": "Garden"}
    out = tmp_path / "export.jsonl"
    with out.open("w") as handle:
        result = export_memory(store, handle)
    assert (result.exchanges, result.documents, result.titles) == (400, 1, 1)


def test_damage_met_mid_search_degrades_that_search_and_the_next_turn_rebuilds(tmp_path: Path) -> None:
    store = filled(tmp_path / "store", exchanges=50)
    session = session_on(store)
    store.lexical._db.close()  # the file fails under a running chat (any sqlite3.Error)
    found = session.turn("where does the ladder hang?").recall()
    assert session.session_memory.on and found is not None
    assert "found by their vectors alone" in (session.session_memory.problem or "")
    assert store.damaged
    session.turn("and the boiler?").recall()
    assert "rebuilt from the store" in (session.session_memory.problem or "") and not store.damaged
    assert store.lexical.count("exchange") == 50 and store.threads.titles(["t3"]) == {"t3": "Garden"}


def test_a_search_with_a_failing_index_still_returns_hits(tmp_path: Path) -> None:
    store = filled(tmp_path / "store", exchanges=30)
    store.prompts._db.close()
    hits = retrieve(store, "question 7 about the garden shed", LIMITS)
    assert hits and all(0.0 <= h.score <= 1.0 for h in hits)
    assert str(store.prompts.path) in store.damaged or str(store.lexical.path) in store.damaged


def test_check_finds_what_is_wrong_and_repair_makes_it_whole(tmp_path: Path) -> None:
    from ocat.memory.ingest.finishing import Finished
    from ocat.memory.store_check import check_store
    from ocat.memory.store_repair import repair_store

    folder = tmp_path / "store"
    store = filled(folder, exchanges=40)
    source = tmp_path / "manual.txt"
    source.write_text("press reset twice, then wait for the green light")
    # Two documents cut short: one whose file is still there, one whose file is gone.
    store.add_chunks([DocumentChunk(f"doc-{k}-0", f"part of {k}", {"document_id": k, "total_chunks": 2,
                                                                    "chunk_index": 0, "source_file": f})
                      for k, f in (("kept", str(source)), ("gone", str(tmp_path / "deleted.txt")))])
    with sqlite3.connect(store.prompts.path) as db:  # an orphan: a vector with no exchange
        db.execute("INSERT INTO prompt_vectors (record_id, vector) VALUES ('ghost', x'00')")
    release(store)
    damage(folder / FILES["lexical"], "header")

    plain = MemoryStore.open(StoreLocation(path=folder), FakeEmbedder(), name="test", upkeep=False)
    found = check_store(plain)
    assert not found.healthy and found.exchanges == 40
    lexical, prompts = found.derived
    assert lexical.damaged and prompts.orphans == 1 and prompts.damaged is None
    assert sorted(p.document_id for p in found.partial_documents) == ["gone", "kept"]
    assert any("DAMAGED" in line for line in found.lines())

    finished: list[str] = []

    def finish(whole: MemoryStore, partial: Any) -> Finished:
        if partial.document_id == "gone":
            from ocat.memory.ingest.finishing import finish_document
            from ocat.text.chunking import ChunkingSettings

            return finish_document(whole, partial, ChunkingSettings("semantic", 1000, 0, 2000, True))
        finished.append(partial.file)
        whole.add_chunks([DocumentChunk("doc-kept-1", "the rest", {"document_id": "kept", "total_chunks": 2,
                                                                   "chunk_index": 1, "source_file": partial.file})])
        return Finished.FINISHED

    done = repair_store(plain, finish)
    assert finished == [str(source)] and done.finished_documents == [str(source)]
    # The document whose file is gone is kept, whole as it is, and said so: a repair deletes nothing.
    assert done.kept_documents == [f"{tmp_path / 'deleted.txt'} (1 of 2 chunks): kept as it is: its file is gone"]
    assert done.after.healthy, done.after.lines()
    reopened = open_store(folder)
    assert reopened.threads.titles(["t3"]) == {"t3": "Garden"} and reopened.count("exchange") == 40
    assert reopened.count("document") == 4 and reopened.get("doc-gone-0") is not None


# -- as a user meets it: the CLI -------------------------------------------------------------------


def cli_store(cli: Cli, folder: Path) -> None:
    """A note and 300 exchanges, stored through the CLI (a template: tests/support/templates.py)."""
    notes = folder / "notes.txt"
    notes.write_text("The spare key is under the blue pot.\n\nThe boiler reset button is on the left.\n")
    assert cli("--add-to-vector-store", str(notes)).returncode == 0
    history = folder / "history.jsonl"
    history.write_text("\n".join(json.dumps({
        "kind": "exchange", "exchange_id": f"e{i}", "thread_id": "t1", "session_id": "s",
        "user_prompt": f"where is thing {i}?", "assistant_response": f"thing {i} is in drawer {i}",
        "timestamp": 1_764_000_000.0 + i, "prior_exchange_ids": [], "thread_session_id": "t1_s",
        "thread_continuation_seq": 0}) for i in range(300)) + "\n")
    assert cli("--import-memory", str(history)).returncode == 0


@pytest.mark.slow
@pytest.mark.parametrize("which", ["lexical", "prompts"])
@pytest.mark.parametrize("how", DAMAGES)
def test_stats_query_and_export_work_on_a_damaged_file(
    cli: Cli, store_templates: StoreTemplates, which: str, how: str
) -> None:
    store_templates.copy_into(cli, "note-and-300-exchanges", cli_store)
    path = cli.store_path / FILES[which].replace("test", "default")
    damage(path, how)
    assert_damaged(path)
    result = cli("--vector-store-stats", "--output", "json")
    assert result.returncode == 0, result.stderr
    assert "was damaged" in result.stderr and "moved aside" in result.stderr and "Traceback" not in result.stderr
    assert result.json()["result"]["exchanges"] == 300
    query = cli("--query-vector-store", "where is the spare key?", "--output", "json")
    assert query.returncode == 0 and "blue pot" in query.stdout
    exported = cli("--export-memory", "-")
    assert exported.returncode == 0 and len(exported.json_lines()) == 301


@pytest.mark.slow
def test_check_store_and_repair_store(cli: Cli, store_templates: StoreTemplates) -> None:
    store_templates.copy_into(cli, "note-and-300-exchanges", cli_store)
    healthy = cli("--check-store", "--output", "json")
    assert healthy.returncode == 0 and healthy.json()["result"]["healthy"] is True
    damage(cli.store_path / "ocat-lexical-default.sqlite3", "page")
    checked = cli("--check-store", "--output", "json")
    assert checked.returncode == 4, checked.stderr
    report: dict[str, Any] = checked.json()["result"]
    assert report["healthy"] is False and report["derived"][0]["damaged"]
    assert report["exchanges"] == 300 and report["documents"] == 1
    text = cli("--check-store")
    assert text.returncode == 4 and "DAMAGED" in text.stdout and "--repair-store" in text.stdout
    repaired = cli("--repair-store", "--output", "json")
    assert repaired.returncode == 0, repaired.stderr
    assert repaired.json()["result"]["healthy"] is True
    assert cli("--check-store").returncode == 0
    assert stats(cli)["exchanges"] == 300


# -- the embedding model's cached graph (ocat.memory.embedding.lean_cache) ----------------------------


def _graph_cache(cli: Cli) -> Path:
    """The model's cached graph in this test's cache folder (a hard link to the worker's)."""
    (graph,) = (cli.home / ".cache" / "ocat" / "models").glob("*.onnx")
    return graph


def damage_graph(graph: Path, how: str) -> bytes:
    """Damage the cached graph as a full disk, a crash or an edit would, in a new file (the old one
    is a hard link other tests share), its time kept; returns its sound bytes."""
    good = graph.read_bytes()
    before = graph.stat()
    middle = len(good) // 2
    bad = {"truncated": good[: len(good) // 3], "empty": b"",
           "altered": good[:middle] + bytes(b ^ 0x5A for b in good[middle : middle + 4096]) + good[middle + 4096 :]}[how]
    graph.unlink()
    graph.write_bytes(bad)
    os.utime(graph, ns=(before.st_atime_ns, before.st_mtime_ns))
    return good


def _top(result: Any) -> tuple[str, float]:
    assert result.returncode == 0, result.stderr
    hit = result.json()["result"]["results"][0]
    return hit["id"], hit["score"]


@pytest.mark.parametrize("how", ["truncated", "empty", "altered"])
def test_a_damaged_model_graph_is_made_again_and_the_query_answers_as_before(cli: Cli, tmp_path: Path,
                                                                            how: str) -> None:
    """A cut-short or empty cached graph made every query exit 1 until deleted by hand; an altered
    one gave vectors at cosine ~0.12 to the true ones, silently."""
    note = tmp_path / "shed.md"
    note.write_text("The ladder hangs on the north wall of the garden shed, behind the mower.\n")
    assert cli("--add-to-vector-store", str(note)).returncode == 0
    question = ("--query-vector-store", "where does the ladder hang in the shed?", "--output", "json")
    before = _top(cli(*question))
    graph = _graph_cache(cli)
    good = damage_graph(graph, how)
    after = cli(*question)
    assert _top(after) == before  # the same vectors: the same hit, the same score
    lines = [line for line in after.stderr.splitlines() if "cached graph" in line]
    assert len(lines) == 1 and "was damaged" in lines[0] and "made it again" in lines[0], after.stderr
    assert graph.read_bytes() == good
    again = cli(*question)
    assert _top(again) == before and "cached graph" not in again.stderr


@pytest.mark.parametrize("action", ["--check-store", "--repair-store"])
def test_check_and_repair_store_report_a_damaged_model_graph_and_make_it_again(cli: Cli, action: str) -> None:
    assert cli("--vector-store-stats").returncode == 0
    graph = _graph_cache(cli)
    shown = f"~/{graph.relative_to(cli.home)}"
    sound = cli("--check-store")
    assert sound.returncode == 0 and f"model graph cache: {shown}: sound" in sound.stdout
    good = damage_graph(graph, "altered")
    found = cli(action)
    assert found.returncode == 0, found.stderr
    assert f"model graph cache: {shown}: DAMAGED (its SHA-256 is not the one it was made with)" in found.stdout
    assert "made again from the model" in found.stdout and graph.read_bytes() == good
    checked = cli("--check-store", "--output", "json")
    assert checked.json()["result"]["model_graph"] == f"model graph cache: {shown}: sound"


@pytest.mark.slow
def test_the_chat_says_a_damaged_model_graph_was_made_again_and_remembers_its_exchanges(
    cli: Cli, capsys: pytest.CaptureFixture[str]
) -> None:
    """The chat kept every exchange unsaved until the cut-short graph was deleted by hand."""
    from ocat.chat.session import ChatSession
    from ocat.config.loading import load_settings

    graph = _graph_cache(cli)
    good = damage_graph(graph, "truncated")
    settings = load_settings(env={**os.environ, "OCAT_VECTOR_STORE_PATH": str(cli.store_path)})
    session = ChatSession.open(settings, serve=False)
    try:
        said = [line for line in capsys.readouterr().err.splitlines() if "cached graph" in line]
        assert len(said) == 1 and "was damaged" in said[0] and "made it again" in said[0]
        assert session.session_memory.on
        recorded = session.record("where does the ladder hang?", "On the north wall of the shed.", [])
        assert recorded.stored and not session.session_memory.unsaved
        assert graph.read_bytes() == good
    finally:
        session.close()
