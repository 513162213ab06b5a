"""The store's operations: exchanges, documents, search, get, delete, idempotency, model checks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ocat.text.chunking import ChunkingSettings
from ocat.errors import InputFileError, StoreError
from ocat.memory import MemoryStore, RetrievalLimits, StoreLocation, add_path, add_text, retrieve
from ocat.records import Exchange
from tests.support.fakes import FakeEmbedder

OPTIONS = ChunkingSettings(
    strategy="semantic", chunk_size=200, chunk_overlap=20, max_chunk_size=300, preserve_sentence_boundaries=True
)

# Retrieval of exchanges alone, every hit shown whatever its score.
EXCHANGES_ONLY = RetrievalLimits(exchange_results=5, document_results=0, exchange_threshold=0.0, document_threshold=0.0)


def exchange(prompt: str, response: str, *, thread: str = "t1", session: str = "s1", ts: float = 1000.0, **kw) -> Exchange:
    return Exchange(user_prompt=prompt, assistant_response=response, thread_id=thread, session_id=session, timestamp=ts, **kw)


def test_exchange_is_stored_with_the_nine_fields_and_embedded_text(store: MemoryStore) -> None:
    ex = exchange("What is the capital of France?", "Paris.", prior_exchange_ids=("a", "b"), thread_continuation_seq=2)
    assert store.add_exchange(ex) is True
    raw = store.exchanges.get(ids=[ex.exchange_id], include=["documents", "metadatas"])
    metadata = raw["metadatas"][0]
    assert set(metadata) == {
        "exchange_id", "thread_id", "session_id", "user_prompt", "assistant_response",
        "timestamp", "prior_exchange_ids", "thread_session_id", "thread_continuation_seq",
    }
    assert metadata["thread_session_id"] == "t1_s1"
    assert metadata["thread_continuation_seq"] == 2
    assert raw["documents"][0] == "User: What is the capital of France?\nAssistant: Paris."
    assert store.get(ex.exchange_id) == ex


def test_adding_the_same_exchange_twice_stores_it_once(store: MemoryStore, fake_embedder: FakeEmbedder) -> None:
    ex = exchange("hello", "hi")
    assert store.add_exchange(ex) is True
    assert store.add_exchange(ex) is False
    assert store.add_exchanges([ex, ex]) == 0
    assert store.count("exchange") == 1
    assert fake_embedder.calls == [2]  # the exchange and its prompt, in one call; nothing re-embedded for a known id


def test_thread_and_session_are_returned_oldest_first(store: MemoryStore) -> None:
    late = exchange("second", "b", ts=2000.0)
    early = exchange("first", "a", ts=1000.0)
    other = exchange("elsewhere", "c", thread="t2", session="s2", ts=1500.0)
    store.add_exchanges([late, other, early])
    assert [e.user_prompt for e in store.get_thread("t1")] == ["first", "second"]
    assert [e.user_prompt for e in store.get_session("s2")] == ["elsewhere"]
    assert store.get_thread("nope") == []


def test_search_finds_the_matching_exchange_with_a_score_in_unit_range(store: MemoryStore) -> None:
    store.add_exchanges(
        [
            exchange("how do I bake sourdough bread", "use a starter", ts=1.0),
            exchange("which python web framework", "try flask", ts=2.0),
        ]
    )
    hits = retrieve(store, "sourdough bread starter", EXCHANGES_ONLY)
    assert hits[0].metadata["user_prompt"] == "how do I bake sourdough bread"
    assert all(0.0 <= h.score <= 1.0 for h in hits)
    assert hits[0].score > hits[1].score


def test_search_with_a_metadata_filter(store: MemoryStore) -> None:
    store.add_exchanges([exchange("bread", "x", thread="a"), exchange("bread", "y", thread="b")])
    hits = retrieve(store, "bread", EXCHANGES_ONLY, where={"thread_id": "b"})
    assert [h.metadata["thread_id"] for h in hits] == ["b"]


def test_add_text_chunks_and_is_idempotent(store: MemoryStore) -> None:
    text = "\n\n".join(f"Paragraph {i} talks about topic number {i} in some detail." * 3 for i in range(6))
    first = add_text(store, text, OPTIONS)
    assert first.added_chunks == first.total_chunks > 1
    again = add_text(store, text, OPTIONS)
    assert again.added_chunks == 0
    assert store.count("document") == first.total_chunks
    metadata = [m for _, m in store.iter_metadata("document")][0]
    assert metadata["source"] == "vadd_command" and metadata["manual_entry"] is True
    assert {"source_file", "chunk_index", "total_chunks", "content_hash", "date_added"} <= set(metadata)


def test_a_partial_document_is_completed_on_re_add(store: MemoryStore) -> None:
    text = "\n\n".join(f"Section {i}: " + "words " * 40 for i in range(5))
    full = add_text(store, text, OPTIONS)
    ids = sorted(list(store.iter_ids("document")))
    store.delete(ids[:2])  # as if the first add had been killed part-way
    repaired = add_text(store, text, OPTIONS)
    assert repaired.added_chunks == 2
    assert store.count("document") == full.total_chunks


def test_re_adding_an_edited_file_replaces_its_old_chunks(store: MemoryStore, tmp_path: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("We decided to use PostgreSQL for the ledger.")
    add_path(store, notes, OPTIONS)
    notes.write_text("We decided to use SQLite for the ledger after all.")
    outcome = add_path(store, notes, OPTIONS)
    assert outcome.added_chunks == 1
    texts = [r.text for r in store.iter_records("document")]
    assert texts == ["We decided to use SQLite for the ledger after all."]


def test_add_path_walks_a_folder_skipping_hidden_and_other_files(store: MemoryStore, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / ".git").mkdir()
    (folder / "a.md").write_text("alpha notes")
    (folder / "sub" / "b.txt").write_text("beta notes")
    (folder / ".git" / "c.md").write_text("hidden")
    (folder / "image.png").write_bytes(b"\x89PNG\x00\x00")
    outcome = add_path(store, folder, OPTIONS)
    assert len(outcome.files) == 2
    files = {Path(m["source_file"]).name for m in [m for _, m in store.iter_metadata("document")]}
    assert files == {"a.md", "b.txt"}


def test_binary_and_missing_input_is_refused_and_other_encodings_decoded(store: MemoryStore, tmp_path: Path) -> None:
    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"\x00\x01\x02")
    latin = tmp_path / "latin.txt"
    latin.write_bytes("café".encode("latin-1"))
    with pytest.raises(InputFileError, match="binary"):
        add_path(store, binary, OPTIONS)
    with pytest.raises(InputFileError, match="no such file"):
        add_path(store, tmp_path / "missing.md", OPTIONS)
    assert store.count("document") == 0
    # Text that is not UTF-8 is not dropped: it is decoded with a fallback, and the caller told.
    notes: list[str] = []
    add_path(store, latin, OPTIONS, notify=notes.append)
    assert [c.text for c in store.documents_where({"source_file": str(latin.resolve())})] == ["café"]
    assert notes == [f"{latin} is not UTF-8 (byte 3); read it as Windows-1252"]


def test_delete_removes_exchanges_and_chunks_by_id(store: MemoryStore) -> None:
    ex = exchange("q", "a")
    store.add_exchange(ex)
    add_text(store, "a manual memory", OPTIONS)
    chunk_id = list(store.iter_ids("document"))[0]
    assert store.delete([ex.exchange_id, chunk_id, "unknown"]) == 2
    assert store.get(ex.exchange_id) is None and store.get(chunk_id) is None


def test_iter_records_pages_through_everything(store: MemoryStore) -> None:
    store.add_exchanges(exchange(f"prompt {i}", "r", ts=float(i)) for i in range(25))
    assert len(list(store.iter_records("exchange", page=10))) == 25


def test_collection_uses_cosine_space(store: MemoryStore) -> None:
    assert store.exchanges.configuration_json["hnsw"]["space"] == "cosine"
    assert store.documents.configuration_json["hnsw"]["space"] == "cosine"


def test_opening_a_store_with_another_embedding_model_is_refused(tmp_path: Path) -> None:
    location = StoreLocation(path=tmp_path / "s")
    MemoryStore.open(location, FakeEmbedder(name="model-a"), name="x").add_exchange(exchange("q", "a"))
    with pytest.raises(StoreError, match="model-a"):
        MemoryStore.open(location, FakeEmbedder(name="model-b"), name="x")
    with pytest.raises(StoreError, match="64-d"):
        MemoryStore.open(location, FakeEmbedder(name="model-a", dimensions=32), name="x")


def test_store_survives_reopening(tmp_path: Path) -> None:
    location = StoreLocation(path=tmp_path / "s")
    ex = exchange("remember me", "ok")
    MemoryStore.open(location, FakeEmbedder(), name="x").add_exchange(ex)
    reopened = MemoryStore.open(location, FakeEmbedder(), name="x")
    assert reopened.get(ex.exchange_id) == ex


def _native_threads() -> int:
    return len(os.listdir("/proc/self/task"))


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
def test_a_closed_store_gives_its_chroma_client_back(tmp_path: Path) -> None:
    # chromadb keeps a client's runtime (~6 threads) for the process's life unless it is closed:
    # a process that opens stores in turn must not grow by that much each time.
    def open_write_close(n: int) -> None:
        store = MemoryStore.open(StoreLocation(path=tmp_path / f"s{n}"), FakeEmbedder(), name="x")
        store.add_exchange(exchange(f"remember {n}", "ok"))
        store.close()

    open_write_close(0)
    before = _native_threads()
    for n in range(1, 11):
        open_write_close(n)
    assert _native_threads() - before < 10, "ten stores opened and closed kept their threads"
    reopened = MemoryStore.open(StoreLocation(path=tmp_path / "s3"), FakeEmbedder(), name="x")
    assert reopened.count("exchange") == 1  # closing kept what was written


def test_stores_that_share_a_client_keep_it_until_the_last_closes(tmp_path: Path) -> None:
    from ocat.memory.storage.client_holds import open_clients

    first = MemoryStore.open(StoreLocation(path=tmp_path / "s"), FakeEmbedder(), name="work")
    second = MemoryStore.reconciled(first.client, first.embedder, name="home", location=first.location)
    open_before = len(open_clients())
    first.close()
    first.close()  # a second close lets go of nothing more
    second.add_exchange(exchange("still open", "yes"))
    assert second.count("exchange") == 1 and len(open_clients()) == open_before
    second.close()
    assert len(open_clients()) == open_before - 1


def test_a_store_that_cannot_open_gives_its_client_back(tmp_path: Path) -> None:
    from ocat.memory.storage.client_holds import open_clients

    location = StoreLocation(path=tmp_path / "s")
    MemoryStore.open(location, FakeEmbedder(name="model-a"), name="x").close()
    open_before = len(open_clients())
    with pytest.raises(StoreError, match="model-a"):
        MemoryStore.open(location, FakeEmbedder(name="model-b"), name="x")
    assert len(open_clients()) == open_before


def test_the_same_text_in_two_files_is_two_documents(store: MemoryStore, tmp_path: Path) -> None:
    a, b = tmp_path / "a.md", tmp_path / "b.md"
    a.write_text("Shared boilerplate about the release process.")
    b.write_text("Shared boilerplate about the release process.")
    add_path(store, a, OPTIONS)
    add_path(store, b, OPTIONS)
    a.write_text("A now says something else entirely.")
    add_path(store, a, OPTIONS)
    sources = sorted(Path(m["source_file"]).name for m in [m for _, m in store.iter_metadata("document")])
    assert sources == ["a.md", "b.md"]  # editing a left b's copy alone


def test_editing_a_file_to_text_stored_elsewhere_still_drops_its_old_version(store: MemoryStore, tmp_path: Path) -> None:
    add_text(store, "Common text that is also a manual note.", OPTIONS)
    notes = tmp_path / "notes.md"
    notes.write_text("The original notes.")
    add_path(store, notes, OPTIONS)
    notes.write_text("Common text that is also a manual note.")
    outcome = add_path(store, notes, OPTIONS)
    assert outcome.replaced_chunks == 1
    texts = [r.text for r in store.iter_records("document")]
    assert "The original notes." not in texts


def test_a_cut_short_add_is_listed_as_partial_until_added_again(store: MemoryStore, tmp_path: Path) -> None:
    from ocat.memory import partial_documents
    from ocat.memory.ingest.documents import document_chunks

    text = "\n\n".join(f"Paragraph {i} about the harbour lantern and the copper meadow." for i in range(40))
    source = str(tmp_path / "harbour.txt")
    chunks = document_chunks(text, OPTIONS, source="cli", source_file=source, extra={"source_path": source})
    assert len(chunks) > 3
    store.add_chunks(chunks[:-2])  # as if the add had died before the last two were written
    [partial] = partial_documents(store)
    assert (partial.stored_chunks, partial.total_chunks, partial.file) == (len(chunks) - 2, len(chunks), source)
    assert add_text(store, text, OPTIONS, source="cli", source_file=source).added_chunks == 2
    assert partial_documents(store) == []
    # A user's delete of one chunk shortens the document on purpose: it is not partial.
    store.delete([chunks[1].id])
    assert partial_documents(store) == []
