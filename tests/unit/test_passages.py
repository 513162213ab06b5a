"""Passage vectors: a vector per window past the embedding model's first, for long exchanges.

Written with the exchange, made in the background for a store from before them, deleted with
their exchange, whole after a crash, and used by retrieval: a fact late in a long answer is
found (ocat.memory.storage.prompt_vectors, docs/RETRIEVAL.md "Passage vectors").
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ocat.memory import MemoryStore, RetrievalLimits, StoreLocation, retrieve
from ocat.memory.embedding.embedders import MAX_PASSAGES
from ocat.memory.storage.derived import beside_index
from ocat.records import Exchange
from tests.support.paths import REPO
from tests.support.late_facts import late_fact_exchanges, late_fact_questions

LIMITS = RetrievalLimits(exchange_results=5, document_results=5, exchange_threshold=0.65, document_threshold=0.7)
SHORT = Exchange(user_prompt="what is a good name for a cat?", assistant_response="Biscotte is a good name.",
                 thread_id="t", session_id="s", exchange_id="short", timestamp=1.0)


def passage_rows(store: MemoryStore) -> dict[str, int | None]:
    """Each exchange's recorded passage count (None: still to be made), read from the file."""
    with sqlite3.connect(beside_index(Path(store.lexical.path), "prompts")) as db:
        return dict(db.execute("SELECT record_id, passages FROM prompt_vectors").fetchall())


def stored_passages(store: MemoryStore) -> dict[str, int]:
    with sqlite3.connect(beside_index(Path(store.lexical.path), "prompts")) as db:
        return dict(db.execute("SELECT record_id, count(*) FROM passage_vectors GROUP BY record_id").fetchall())


def stored_then_forgotten(location: StoreLocation, embedder: Any) -> dict[str, int]:
    """Store the late-fact exchanges, note their passages, then forget them all (every exchange
    marked to be done, as a crash or an older store leaves it); returns what was noted."""
    store = MemoryStore.open(location, embedder)
    store.add_exchanges(late_fact_exchanges())
    expected = stored_passages(store)
    store.prompts.delete_passages()
    store.close()
    return expected


def make_pre_passages(path: Path) -> None:
    """Turn a store's prompt file into one an ocat from before passages wrote."""
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE passage_vectors")
        db.execute("DROP INDEX IF EXISTS prompt_vectors_waiting")  # made with the column, since
        db.execute("ALTER TABLE prompt_vectors DROP COLUMN passages")


def test_a_long_exchange_gets_passages_and_a_short_one_none(real_store: MemoryStore) -> None:
    real_store.add_exchanges([*late_fact_exchanges(), SHORT])
    rows, stored = passage_rows(real_store), stored_passages(real_store)
    assert rows["short"] == 0 and "short" not in stored
    for exchange in late_fact_exchanges():
        assert 1 <= rows[exchange.exchange_id] == stored[exchange.exchange_id] <= MAX_PASSAGES


def test_passages_are_bounded_for_a_huge_text(real_embedder: Any) -> None:
    huge = " ".join(f"word{i}" for i in range(200_000))
    passages = real_embedder.passages(huge)
    assert len(passages) == MAX_PASSAGES
    # Windows follow each other through the text, each a full window of the model.
    assert all(len(real_embedder._tokenizer.encode(p).ids) >= 200 for p in passages)


def test_a_fact_past_the_first_window_is_found_by_its_passage(real_store: MemoryStore) -> None:
    real_store.add_exchanges(late_fact_exchanges())
    with_passages = {q: retrieve(real_store, q, LIMITS) for q, _ in late_fact_questions()}
    real_store.prompts.delete_passages()
    without = {q: retrieve(real_store, q, LIMITS) for q, _ in late_fact_questions()}
    for question, target in late_fact_questions():
        assert with_passages[question][0].id == target, question

    def score(hits: list[Any], target: str) -> float:
        return next(h.score for h in hits if h.id == target)

    lifted = [score(with_passages[q], t) - score(without[q], t) for q, t in late_fact_questions()]
    # The passage is closer to the question than the opening window for most of them, by a lot for some.
    assert sum(d > 0.02 for d in lifted) >= 3 and max(lifted) > 0.1 and min(lifted) >= 0


def test_deleting_an_exchange_deletes_its_passages(real_store: MemoryStore) -> None:
    real_store.add_exchanges(late_fact_exchanges())
    gone = late_fact_exchanges()[0].exchange_id
    assert real_store.delete([gone]) == 1
    assert gone not in stored_passages(real_store) and gone not in passage_rows(real_store)
    assert len(stored_passages(real_store)) == len(late_fact_exchanges()) - 1


def test_an_older_store_gets_its_passages_in_the_background_on_open(tmp_path: Path, real_embedder: Any) -> None:
    location = StoreLocation(path=tmp_path / "old")
    store = MemoryStore.open(location, real_embedder)
    store.add_exchanges([*late_fact_exchanges(), SHORT])
    expected = stored_passages(store)
    prompts = beside_index(Path(store.lexical.path), "prompts")
    store.close()
    make_pre_passages(prompts)

    reopened = MemoryStore.open(location, real_embedder)
    assert reopened.backfill is not None, "an older store starts its backfill"
    assert reopened.backfill.wait(60)
    assert stored_passages(reopened) == expected
    assert set(passage_rows(reopened).values()) - {None} and None not in passage_rows(reopened).values()
    question, target = late_fact_questions()[0]
    assert retrieve(reopened, question, LIMITS)[0].id == target
    reopened.close()
    # Nothing left to do: the next open starts no backfill.
    again = MemoryStore.open(location, real_embedder)
    assert again.backfill is None
    again.close()


def test_closing_stops_the_backfill_after_a_step_and_the_next_open_finishes(
    tmp_path: Path, real_embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ocat.memory.storage.passages.PASSAGE_STEP", 1)
    location = StoreLocation(path=tmp_path / "old")
    expected = stored_then_forgotten(location, real_embedder)

    reopened = MemoryStore.open(location, real_embedder)
    reopened.close()  # at once: waits for the step under way, no more
    assert reopened.backfill is not None and not reopened.backfill.thread.is_alive()
    rows = passage_rows(reopened)
    done = [i for i, n in rows.items() if n is not None]
    # What was done is whole: each done exchange has all its passages.
    assert all(stored_passages(reopened).get(i, 0) == rows[i] for i in done)
    final = MemoryStore.open(location, real_embedder)
    assert final.backfill is None or final.backfill.wait(60)
    assert stored_passages(final) == expected
    final.close()


def test_a_crash_between_chroma_and_the_passages_is_mended_on_open(
    tmp_path: Path, real_embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ocat.memory.storage.prompt_vectors import PromptVectors

    location = StoreLocation(path=tmp_path / "crash")
    store = MemoryStore.open(location, real_embedder)

    def crash(*_: Any, **__: Any) -> None:
        raise KeyboardInterrupt("killed between the writes")

    monkeypatch.setattr(PromptVectors, "write", crash)
    with pytest.raises(KeyboardInterrupt):
        store.add_exchanges(late_fact_exchanges())
    monkeypatch.undo()
    assert store.count("exchange") == len(late_fact_exchanges()) and not stored_passages(store)
    store.close()
    reopened = MemoryStore.open(location, real_embedder)
    assert reopened.backfill is None or reopened.backfill.wait(60)
    rows = passage_rows(reopened)
    assert len(rows) == len(late_fact_exchanges()) and all(n for n in rows.values())
    assert sum(stored_passages(reopened).values()) == sum(rows.values())
    reopened.close()


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_a_process_killed_mid_backfill_leaves_whole_steps_and_the_next_open_completes(
    tmp_path: Path, real_embedder: Any
) -> None:
    location = StoreLocation(path=tmp_path / "killed")
    expected = stored_then_forgotten(location, real_embedder)
    model = Path(real_embedder._locate())
    script = textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        from ocat.memory import MemoryStore, StoreLocation
        from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder
        import ocat.memory.storage.passages as passages
        passages.PASSAGE_STEP = 1
        real = passages._embed_passages
        calls = []
        def embed_then_die(store, ids, *rest):
            real(store, ids, *rest)
            calls.append(1)
            if len(calls) == 2:
                os.kill(os.getpid(), signal.SIGKILL)  # after two whole steps, in the middle of the backfill
        passages._embed_passages = embed_then_die
        store = MemoryStore.open(StoreLocation(path=Path({str(location.path)!r})), OnnxMiniLMEmbedder(Path({str(model)!r})))
        store.backfill.wait(60)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == -9, done.stderr
    # The database itself, not its -wal or -shm beside it (which one a folder lists first varies).
    prompts = next((tmp_path / "killed").rglob("*prompts*.sqlite3"))
    with sqlite3.connect(prompts) as db:
        rows = dict(db.execute("SELECT record_id, passages FROM prompt_vectors").fetchall())
        kept = dict(db.execute("SELECT record_id, count(*) FROM passage_vectors GROUP BY record_id").fetchall())
    # Two whole steps were committed before the kill; the rest are still to do, none half-written.
    assert sorted(n is None for n in rows.values()) == [False, False] + [True] * (len(rows) - 2)
    assert all(kept.get(i, 0) == n for i, n in rows.items() if n is not None)
    assert all(i not in kept for i, n in rows.items() if n is None)
    reopened = MemoryStore.open(location, real_embedder)
    assert reopened.backfill is not None and reopened.backfill.wait(60)
    assert stored_passages(reopened) == expected
    assert None not in passage_rows(reopened).values()
    reopened.close()
