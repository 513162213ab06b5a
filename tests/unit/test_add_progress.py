"""A long add (`/vdoc`, `--add-to-vector-store`): progress from the start, in small steps, and a
cancel that stops before the next step, keeping whole chunks and the document detectably partial."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Sequence

import pytest

from ocat.text.chunking import ChunkingSettings
from ocat.errors import Cancelled
from ocat.memory import MemoryStore, StoreLocation, add_path, add_text, partial_documents
from ocat.memory.ingest.documents import document_chunks
from ocat.memory.storage.store import EMBED_STEP, WRITE_BATCH
from ocat.operations.add import progress_printer
from tests.support.fakes import FakeEmbedder
from tests.support.pilot import make_app, memory_ready, notices, send, wait_for

# One short paragraph, one chunk.
SMALL = ChunkingSettings(strategy="fixed_size", chunk_size=40, chunk_overlap=0, max_chunk_size=40,
                        preserve_sentence_boundaries=False)


def paragraphs(count: int) -> str:
    return "\n\n".join(f"Paragraph {i} is about topic {i}." for i in range(count))


class RecordingEmbedder(FakeEmbedder):
    """The fake embedder, noting each call in a shared event list (and sleeping `delay` per call)."""

    def __init__(self, events: list[tuple[Any, ...]], *, delay: float = 0.0, **kw: Any) -> None:
        super().__init__(**kw)
        self.events = events
        self.delay = delay

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.events.append(("embed", len(texts)))
        if self.delay:
            time.sleep(self.delay)
        return super().embed(texts)


def recording_store(tmp_path: Path, events: list[tuple[Any, ...]]) -> MemoryStore:
    return MemoryStore.open(StoreLocation(path=tmp_path / "store"), RecordingEmbedder(events), name="test")


def test_progress_starts_at_zero_before_any_embedding_then_moves_in_small_steps(tmp_path: Path) -> None:
    events: list[tuple[Any, ...]] = []
    store = recording_store(tmp_path, events)
    result = add_text(store, paragraphs(400), SMALL, progress=lambda done, total: events.append(("progress", done, total)))
    total = result.total_chunks
    assert total > WRITE_BATCH  # more than one write batch
    assert events[0] == ("progress", 0, total)  # the total is known before the first embedding
    embeds = [e[1] for e in events if e[0] == "embed"]
    assert embeds and max(embeds) <= EMBED_STEP and sum(embeds) == total
    done = [e[1] for e in events if e[0] == "progress"]
    assert done[-1] == total
    assert all(0 < b - a <= EMBED_STEP for a, b in zip(done, done[1:]))
    # Every embedding step is followed by a report (the place a cancel is noticed).
    for i, event in enumerate(events):
        if event[0] == "embed":
            assert events[i + 1][0] == "progress"


def test_a_folder_reports_its_total_before_embedding_too(tmp_path: Path) -> None:
    events: list[tuple[Any, ...]] = []
    store = recording_store(tmp_path, events)
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.txt").write_text(paragraphs(40))
    (folder / "b.txt").write_text(paragraphs(50))
    add_path(store, folder, SMALL, chunks_stored=lambda path, done, total: events.append(("progress", done, total)))
    first = next(i for i, e in enumerate(events) if e[0] == "progress")
    assert events[first][1] == 0 and events[first][2] > EMBED_STEP
    assert ("embed", EMBED_STEP) not in events[:first]


def test_a_cancel_during_embedding_stops_before_the_next_step_and_keeps_whole_chunks(tmp_path: Path) -> None:
    events: list[tuple[Any, ...]] = []
    store = recording_store(tmp_path, events)
    text = paragraphs(300)
    total = len(document_chunks(text, SMALL, source="vadd_command"))
    stop_at = 2 * EMBED_STEP

    def progress(done: int, total: int) -> None:
        events.append(("progress", done, total))
        if done >= stop_at:
            raise Cancelled(f"cancelled at {done}/{total}")

    # A file's add (a note cut short is not "partial": it has no file to finish it from).
    source = str(tmp_path / "paragraphs.txt")
    with pytest.raises(Cancelled):
        add_text(store, text, SMALL, progress=progress, source="cli", source_file=source)
    assert [e for e in events if e[0] == "embed"] == [("embed", EMBED_STEP)] * 2  # no third step
    # What was embedded is stored (in the middle of a write batch), whole and searchable.
    assert store.count("document") == stop_at
    assert store.lexical.count("document") == stop_at
    stored = store.documents.get(include=["documents", "embeddings", "metadatas"])
    assert all(text_ and len(vector) == store.embedder.dimensions
               for text_, vector in zip(stored["documents"], stored["embeddings"]))
    assert len({m["chunk_index"] for m in stored["metadatas"]}) == stop_at
    [partial] = partial_documents(store)
    assert (partial.stored_chunks, partial.total_chunks) == (stop_at, total)
    # Adding it again stores exactly the rest, and the document is whole.
    again = add_text(store, text, SMALL, source="cli", source_file=source)
    assert again.added_chunks == total - stop_at
    assert store.count("document") == total and partial_documents(store) == []


def test_the_text_faces_print_the_total_first_then_at_most_once_a_second() -> None:
    lines: list[str] = []
    report = progress_printer(lines.append)
    for done in range(0, 1001, EMBED_STEP):
        report("big.txt", done, 1000)
    report("big.txt", 1000, 1000)
    assert lines[0] == "big.txt: 0/1000 chunks stored"
    assert lines[-1] == "big.txt: 1000/1000 chunks stored"
    assert len(lines) == 2  # the steps in between came within a second


@pytest.mark.anyio
async def test_vdoc_shows_the_bar_before_the_first_batch_and_esc_stops_it_within_a_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ocat.memory.embedding.model_files import LOCAL_MODEL_NAME
    from ocat.ui.widgets import TaskProgress

    events: list[tuple[Any, ...]] = []
    embedded = threading.Event()
    # A slow fake in the real model's place: 0.1 s a step, so the first write batch (256
    # chunks) would take 1.6 s.
    slow = RecordingEmbedder(events, delay=0.1, name=LOCAL_MODEL_NAME, dimensions=384)
    original = slow.embed

    def embed(texts: Sequence[str]) -> list[list[float]]:
        vectors = original(texts)
        if len(texts) > 1:
            embedded.set()
        return vectors

    slow.embed = embed  # type: ignore[method-assign]
    monkeypatch.setattr("ocat.memory.opening.embedder_for", lambda settings: slow)
    # When the bar is drawn, among the embedding steps: the test itself may look later (each key
    # and pause of Pilot waits up to a second for a busy process to go idle, and /vdoc keeps it busy).
    show = TaskProgress.show

    def shown(bar: TaskProgress, label: str, done: int, total: int) -> None:
        show(bar, label, done, total)
        events.append(("shown", done))

    monkeypatch.setattr(TaskProgress, "show", shown)
    big = tmp_path / "big.txt"
    big.write_text(paragraphs(3000))
    app = make_app(dummy=True, **{"chunking.strategy": "fixed_size", "chunking.chunk_size": 40,
                                  "chunking.chunk_overlap": 0, "chunking.max_chunk_size": 40})
    async with app.run_test(size=(80, 24)) as pilot:
        await memory_ready(app, pilot)
        store = app.session.session_memory.store
        assert store is not None and store.embedder is slow
        await send(app, pilot, f"/vdoc {big}")
        await wait_for(pilot, lambda: app.query(TaskProgress), "the progress bar")
        first_shown = next(n for n, e in enumerate(events) if e[0] == "shown")
        steps_when_shown = sum(1 for e in events[:first_shown] if e[0] == "embed" and e[1] > 1)
        assert steps_when_shown < 256 // EMBED_STEP  # shown well before the first write batch ends
        await wait_for(pilot, embedded.is_set, "embedding has started")
        pressed, seen = time.monotonic(), len(events)
        await pilot.press("escape")
        assert app.commands.worker is not None
        await app.commands.worker.wait()
        await pilot.pause()
        # Stopped after the step being embedded (at most one more), its write and the notice:
        # well within a second on an idle machine; the bound here allows for a busy one.
        assert sum(1 for e in events[seen:] if e[0] == "embed") <= 1
        assert time.monotonic() - pressed < 3.0
        assert not app.query(TaskProgress)
        notice = notices(app)[-1]
        assert "cancelled at" in notice and "what was stored is kept" in notice
        stored = store.count("document")
        [partial] = partial_documents(store)
        assert 0 < partial.stored_chunks == stored < partial.total_chunks
        assert f"cancelled at {stored}/{partial.total_chunks}" in notice
