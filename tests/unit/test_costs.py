"""What retrieval and ingest cost in calls to the model and to Chroma.

A chat turn's queries share one embedding call and one Chroma query, texts are read only
for the hits kept, and a folder of small files is embedded and written in full batches.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ocat.text.chunking import ChunkingSettings
from ocat.memory import MemoryStore, RetrievalLimits, StoreLocation, add_path, floor_of, retrieve
from ocat.memory.retrieval.retrieve import retrieve_any
from ocat.records import Exchange
from tests.support.fakes import FakeEmbedder

LIMITS = RetrievalLimits(exchange_results=3, document_results=2, exchange_threshold=0.5, document_threshold=0.5)
TOPICS = ["sourdough bread starter", "python web framework", "garden tomato plants", "billing database choice"]


def _fill(store: MemoryStore) -> None:
    store.add_exchanges(
        Exchange(
            user_prompt=f"{TOPICS[i % 4]} question {i}",
            assistant_response=f"an answer about {TOPICS[i % 4]} number {i}",
            thread_id=f"t{i % 5}",
            session_id="s",
            timestamp=float(i),
        )
        for i in range(40)
    )


class CountingCollection:
    """Wraps a Chroma collection to record which calls retrieval makes."""

    def __init__(self, inner: Any, log: list[tuple[str, Any]]) -> None:
        self._inner, self._log = inner, log

    def query(self, **kwargs: Any) -> Any:
        self._log.append(("query", (len(kwargs["query_embeddings"]), tuple(kwargs["include"]))))
        return self._inner.query(**kwargs)

    def get(self, **kwargs: Any) -> Any:
        self._log.append(("get", (len(kwargs.get("ids") or []), tuple(kwargs["include"]))))
        return self._inner.get(**kwargs)

    def add(self, **kwargs: Any) -> Any:
        self._log.append(("add", len(kwargs["ids"])))
        return self._inner.add(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_a_chat_turns_queries_share_one_embedding_call_and_one_chroma_query(
    store: MemoryStore, fake_embedder: FakeEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(store)
    floor_of(store).shift()  # measured once per store, not per turn (tests/unit/test_floor.py)
    log: list[tuple[str, Any]] = []
    monkeypatch.setattr(store, "exchanges", CountingCollection(store.exchanges, log))
    fake_embedder.calls.clear()
    hits = retrieve_any(store, ["tomato plants", "bread starter\ntomato plants"], LIMITS)
    assert fake_embedder.calls == [2]
    queries = [detail for call, detail in log if call == "query"]
    assert queries == [(2, ("distances",))]  # ids and distances only, both vectors at once
    # Texts and metadata are read once, for at most twice the hits wanted.
    reads = [detail for call, detail in log if call == "get" and "documents" in detail[1]]
    assert len(reads) == 1 and reads[0][0] <= 2 * LIMITS.exchange_results
    assert hits and all(h.text and h.metadata for h in hits)


def test_retrieve_any_keeps_each_memorys_best_score_over_the_queries(store: MemoryStore) -> None:
    _fill(store)
    queries = ["tomato plants", "python framework"]
    together = retrieve_any(store, queries, LIMITS)
    alone = [h for q in queries for h in retrieve(store, q, LIMITS)]
    best: dict[str, float] = {}
    for hit in alone:
        best[hit.id] = max(best.get(hit.id, 0.0), hit.score)
    expected = sorted(best.values(), reverse=True)[: LIMITS.exchange_results]
    # The same best scores (ties may swap ids of equal score), each the memory's best.
    assert [round(h.score, 9) for h in together] == [round(s, 9) for s in expected]
    assert all(round(h.score, 9) == round(best[h.id], 9) for h in together)


def test_a_folder_of_small_files_is_embedded_and_written_in_full_batches(
    store: MemoryStore, fake_embedder: FakeEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    for i in range(30):
        # .txt: a folder's markdown is split at headings instead of by these options.
        (folder / f"note{i:02d}.txt").write_text(f"Note {i} about {TOPICS[i % 4]}.\n\nA second paragraph, number {i}.")
    options = ChunkingSettings(
        strategy="fixed_size", chunk_size=30, chunk_overlap=0, max_chunk_size=30, preserve_sentence_boundaries=True
    )
    log: list[tuple[str, Any]] = []
    monkeypatch.setattr(store, "documents", CountingCollection(store.documents, log))
    fake_embedder.calls.clear()
    outcome = add_path(store, folder, options)
    assert outcome.added_chunks == outcome.total_chunks == store.count("document") > 60
    assert all(r.added_chunks == r.total_chunks > 1 for r in outcome.files)  # each file's own count
    # Under one batch in all: one embedding call and one Chroma add, not one per file.
    assert fake_embedder.calls == [outcome.total_chunks]
    assert [n for call, n in log if call == "add"] == [outcome.total_chunks]
    again = add_path(store, folder, options)
    assert again.added_chunks == 0 and again.total_chunks == outcome.total_chunks


def test_the_model_runs_length_sorted_batches_within_the_token_budget(real_embedder: Any) -> None:
    from ocat.memory.embedding import embedders as embeddings

    texts = [("word " * n).strip() for n in (3, 400, 40, 1, 120, 250, 8, 60, 300, 2)] * 3
    alone = [real_embedder.embed([t])[0] for t in texts]
    real_embedder._load()
    session = real_embedder._session
    shapes: list[tuple[int, int]] = []

    class Recording:
        def run(self, names: Any, feeds: dict[str, Any]) -> Any:
            shapes.append(feeds["input_ids"].shape)
            return session.run(names, feeds)

    real_embedder._session = Recording()
    try:
        together = real_embedder.embed(texts)
    finally:
        real_embedder._session = session
    # Same vectors, in the input order, as one text at a time.
    assert all(sum(a * b for a, b in zip(x, y)) > 0.9999 for x, y in zip(alone, together))
    assert sum(rows for rows, _ in shapes) == len(texts)
    assert all(rows == 1 or rows * width <= embeddings.BATCH_TOKENS for rows, width in shapes)
    assert max(width for _, width in shapes) == embeddings.MAX_TOKENS  # long texts are cut at 256 tokens
    assert max(rows for rows, _ in shapes) > 1  # short texts do share batches
    # Every batch has its own width; onnxruntime's memory pattern would keep a block per width
    # seen (~150 MB over an import, docs/PERFORMANCE.md), so it is off.
    assert session.get_session_options().enable_mem_pattern is False


def test_opening_stores_reads_chromas_settings_once_a_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chroma's settings are read from the environment (and a `.env` file) once a process, not for
    each client (8 ms of CPU each); each client still gets settings of its own to write its path into."""
    from chromadb.config import Settings

    read: list[Any] = []
    reading = Settings.__init__

    def counted(self: Any, *args: Any, **kwargs: Any) -> None:
        read.append(kwargs)
        reading(self, *args, **kwargs)

    monkeypatch.setattr(Settings, "__init__", counted)
    stores = [MemoryStore.open(StoreLocation(path=tmp_path / f"s{n}"), FakeEmbedder(), name="test") for n in range(3)]
    assert len(read) <= 1  # none when an earlier test of this process opened a store
    paths = {store.client.get_settings().persist_directory for store in stores}  # type: ignore[attr-defined]
    assert paths == {str(tmp_path / f"s{n}") for n in range(3)}
    assert not any(store.client.get_settings().anonymized_telemetry for store in stores)  # type: ignore[attr-defined]
