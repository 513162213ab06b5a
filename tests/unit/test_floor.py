"""A store's floor (ocat.memory.retrieval.store_floor): measured once, kept, measured again as the store grows,
and what an exchange's relevance is judged against."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import pytest

from ocat.errors import StoreError
from ocat.memory import MemoryStore, RetrievalLimits, floor_of, retrieve
from ocat.memory.retrieval import store_floor as floor_module
from ocat.memory.retrieval.store_floor import FLOOR_MARGIN, MIN_EXCHANGES, StoreFloor
from ocat.memory.retrieval.generic_questions import GENERIC_QUESTIONS
from ocat.memory.retrieval.rank import best_exchange_z
from ocat.records import Exchange
from tests.support.cli import Cli
from tests.support.data import write_exchanges

LIMITS = RetrievalLimits(exchange_results=5, document_results=5, exchange_threshold=0.65, document_threshold=0.7)


def everyday(count: int, start: int = 0) -> list[Exchange]:
    """Exchanges on the subjects generic questions ask about: a store they find a lot in."""
    return [
        Exchange(user_prompt=q, assistant_response=f"Here is how, step by step, about {q}",
                 thread_id=f"t{i}", session_id="s", timestamp=float(i))
        for i, q in enumerate(GENERIC_QUESTIONS[start : start + count], start=start)
    ]


def reopen(store: MemoryStore) -> MemoryStore:
    return MemoryStore.open(store.location, store.embedder, name=store.name)


def test_a_small_store_is_judged_by_the_calibration_alone(store: MemoryStore) -> None:
    store.add_exchanges(everyday(MIN_EXCHANGES - 1))
    assert floor_of(store).shift() == 0.0
    assert floor_of(store).current() is None  # not even measured


def test_a_store_where_generic_questions_find_a_lot_asks_more(store: MemoryStore) -> None:
    store.add_exchanges(everyday(30))
    shift = floor_of(store).shift()
    measured = floor_of(store).current()
    assert measured is not None and measured.exchanges == 30
    assert measured.median == pytest.approx(statistics.median(best_exchange_z(store, GENERIC_QUESTIONS)))
    assert shift == pytest.approx(measured.median + FLOOR_MARGIN - store.calibration.z_at(0.65)) and shift > 0
    question = "how do I clean a cast iron pan?"
    [judged] = retrieve(store, question, LIMITS, limit=1)
    floor_of(store).shift = lambda: 0.0  # type: ignore[method-assign]
    [alone] = retrieve(store, question, LIMITS, limit=1)
    assert judged.id == alone.id and judged.score < alone.score  # the same hit, asked more of


def test_the_floors_one_pass_scores_each_question_as_a_search_of_it_alone(store: MemoryStore) -> None:
    from ocat.memory.retrieval.rank import MIN_POOL, rank_candidates
    from ocat.memory.storage.terms import query_terms

    store.add_exchanges(everyday(40))
    store.add_exchanges(everyday(10, start=50))  # some threads with neighbours, some questions with nothing near
    questions = [*GENERIC_QUESTIONS[:10], *GENERIC_QUESTIONS[60:80], "zebra crossing quantum gravel", "how do I clean a pan?"]
    alone = []
    for question in questions:
        [vector] = store.embedder.embed([question])
        found = rank_candidates(store, "exchange", [query_terms(question)], [vector], MIN_POOL, None, "hybrid", keep=10)
        alone.append(max((c.z for c in found), default=0.0))
    assert best_exchange_z(store, questions) == pytest.approx(alone, abs=1e-6)
    assert len(set(alone)) > 10  # the questions differ: a pass that mixed them up would show


def test_the_floor_is_kept_and_the_next_open_does_not_measure_again(store: MemoryStore) -> None:
    store.add_exchanges(everyday(30))
    first = floor_of(store).shift()
    again = reopen(store)
    calls = len(store.embedder.calls)  # type: ignore[attr-defined]
    assert floor_of(again).shift() == pytest.approx(first)
    assert len(store.embedder.calls) == calls  # type: ignore[attr-defined]


def test_a_grown_store_is_measured_again_in_the_background(store: MemoryStore) -> None:
    store.add_exchanges(everyday(30))
    floor_of(store).shift()
    before = floor_of(store).current()
    assert before is not None
    store.add_exchanges(everyday(25, start=30))  # more than MIN_CHANGE since the measurement
    floor_of(store).shift()  # answers with the last measurement, and starts a new one
    deadline = time.monotonic() + 30
    while (floor_of(store).current() or floor_module.Floor(0, 0)).exchanges != 55 and time.monotonic() < deadline:
        time.sleep(0.05)
    after = floor_of(store).current()
    assert after is not None and after.exchanges == 55
    # The new measurement is of the grown store (25 more generic questions now find themselves),
    # not the old one carried over.
    grown = statistics.median(best_exchange_z(store, GENERIC_QUESTIONS))
    assert after.median == pytest.approx(grown) and after.median != pytest.approx(before.median)


def test_a_failed_measurement_leaves_the_calibration_alone(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.add_exchanges(everyday(30))

    def fail(self: StoreFloor) -> Any:
        raise StoreError("cannot read the memory store: gone")

    monkeypatch.setattr(StoreFloor, "measure", fail)
    assert floor_of(store).shift() == 0.0
    assert retrieve(store, "how do I clean a cast iron pan?", LIMITS)  # search goes on


def test_documents_are_not_judged_against_the_exchanges_floor(store: MemoryStore) -> None:
    from ocat.memory.ingest.documents import add_text
    from ocat.text.chunking import ChunkingSettings

    store.add_exchanges(everyday(30))
    assert floor_of(store).shift() > 0
    add_text(store, "To season a cast iron pan, oil it thinly and bake it upside down for an hour.", ChunkingSettings("fixed_size", 400, 0, 400, True))
    judged = [h for h in retrieve(store, "how do I season a cast iron pan?", LIMITS) if h.kind == "document"]
    floor_of(store).shift = lambda: 0.0  # type: ignore[method-assign]
    alone = [h for h in retrieve(store, "how do I season a cast iron pan?", LIMITS) if h.kind == "document"]
    assert judged and judged[0].score == pytest.approx(alone[0].score)


def test_a_one_shot_command_on_a_grown_store_waits_for_the_new_measurement_and_exits_cleanly(
    cli: Cli, tmp_path: Path
) -> None:
    source = tmp_path / "memory.jsonl"
    write_exchanges(source, 30)
    assert cli("--import-memory", str(source)).returncode == 0
    first = cli("--query-vector-store", "note about items", "--output", "json")  # measures the floor
    assert first.returncode == 0, first.stderr
    write_exchanges(source, 60)  # the same 30, and 30 more
    assert cli("--import-memory", str(source)).returncode == 0
    # Stale now: measured again in a thread, which the process waits for instead of aborting
    # in the model's native threads at shutdown.
    again = cli("--query-vector-store", "note about items", "--output", "json")
    assert again.returncode == 0 and "terminate" not in again.stderr, again.stderr
    assert cli("--vector-store-stats", "--output", "json").json()["result"]["floor"] is not None
