"""The lexical index, coverage scoring, neighbour lookup, the index's self-repair, and the token budget."""

from __future__ import annotations

from pathlib import Path

from ocat.memory import MemoryStore, StoreLocation
from ocat.memory.lexical import LexicalIndex, stem, terms
from ocat.memory.retrieval import within_budget
from ocat.memory.scoring import Calibration, coverage
from ocat.models import Exchange, SearchHit
from tests.conftest import FakeEmbedder


def test_terms_drop_stop_words_and_fold_simple_suffixes() -> None:
    assert terms("The cats were running to the Bakeries!") == ["cat", "runn", "bakery"]
    assert stem("glass") == "glass" and stem("is") == "is"


def test_index_search_delete_and_idempotent_add(tmp_path: Path) -> None:
    index = LexicalIndex(tmp_path / "lex.sqlite3")
    rows = [("a", "sourdough bread starter", {}), ("b", "python web framework", {})]
    index.add("document", rows)
    index.add("document", rows)
    assert index.count("document") == 2
    assert [i for i, _ in index.search("document", terms("bread"), 5)] == ["a"]
    assert index.doc_freqs("document", ["bread", "unseen"]) == {"bread": 1, "unseen": 0}
    index.delete("document", ["a"])
    assert index.search("document", terms("bread"), 5) == [] and index.count("document") == 1


def test_neighbours_follow_thread_order(tmp_path: Path) -> None:
    index = LexicalIndex(tmp_path / "lex.sqlite3")
    index.add(
        "exchange",
        [(f"e{i}", f"text {i}", {"thread_id": "t" if i < 3 else "u", "timestamp": float(i)}) for i in range(4)],
    )
    assert index.neighbours(["e0", "e1", "e2", "e3"]) == {
        "e0": (None, "e1"), "e1": ("e0", "e2"), "e2": ("e1", None), "e3": (None, None),
    }


def test_coverage_weights_rare_terms_and_punishes_unknown_ones() -> None:
    freqs = {"caroline": 50, "pottery": 1, "jon": 0}
    assert coverage(["caroline", "pottery"], {"caroline", "pottery"}, freqs, 100) == 1.0
    rare_only = coverage(["caroline", "pottery"], {"pottery"}, freqs, 100)
    common_only = coverage(["caroline", "pottery"], {"caroline"}, freqs, 100)
    assert rare_only > 0.5 > common_only
    # A query about someone the store has never heard of cannot be well covered.
    assert coverage(["jon", "pottery"], {"pottery"}, freqs, 100) < 0.5


def test_calibration_maps_to_unit_range_and_round_trips_through_metadata() -> None:
    calibration = Calibration(cosine_weight=1.0, coverage_weight=1.0, center=0.5, scale=6.0)
    assert 0.0 < calibration.relevance(0.0, 0.0) < calibration.relevance(0.5, 0.5) < calibration.relevance(1, 1) < 1.0
    assert Calibration.from_metadata(calibration.to_metadata()) == calibration
    assert Calibration.from_metadata({"embedding_model": "x"}) is None


def test_a_missing_or_stale_lexical_index_is_rebuilt_on_open(tmp_path: Path) -> None:
    location = StoreLocation(path=tmp_path / "s")
    store = MemoryStore.open(location, FakeEmbedder(), name="x")
    store.add_exchanges(
        Exchange(user_prompt=f"topic {i} marmalade", assistant_response="ok", thread_id="t", session_id="s", timestamp=i)
        for i in range(5)
    )
    store.lexical.close()
    (tmp_path / "s" / "ocat-lexical-x.sqlite3").unlink()
    reopened = MemoryStore.open(location, FakeEmbedder(), name="x")
    assert reopened.lexical.count("exchange") == 5
    assert len(reopened.lexical.search("exchange", ["marmalade"], 10)) == 5
    assert reopened.lexical.neighbours(["x"]) == {}


def test_memory_is_cut_to_the_token_budget_best_first() -> None:
    hits = [
        SearchHit(id="big", kind="exchange", score=0.9, text="word " * 400, metadata={}),
        SearchHit(id="small", kind="exchange", score=0.8, text="a short memory", metadata={}),
    ]
    assert [h.id for h in within_budget(hits, 1000)] == ["big", "small"]
    assert [h.id for h in within_budget(hits, 100)] == ["small"]
    assert within_budget(hits, 0) == []
