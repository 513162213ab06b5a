"""The lexical index, coverage scoring, neighbour lookup, the index's self-repair, and the token budget."""

from __future__ import annotations

from pathlib import Path

import pytest

from ocat.memory.storage import terms as term_rules
from ocat.memory import MemoryStore, StoreLocation
from ocat.memory.storage.lexical_index import LexicalIndex
from ocat.memory.storage.terms import stem, terms
from ocat.memory.retrieval.given import within_budget
from ocat.memory.storage.scoring import Calibration, coverage
from ocat.records import Exchange, SearchHit
from tests.support.fakes import FakeEmbedder


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
    assert index.threads.neighbours(["e0", "e1", "e2", "e3"]) == {
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
    relevance = [calibration.relevance_of(calibration.combine(c, c)) for c in (0.0, 0.5, 1.0)]
    assert 0.0 < relevance[0] < relevance[1] < relevance[2] < 1.0
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
    assert reopened.threads.neighbours(["x"]) == {}


def test_memory_is_cut_to_the_token_budget_best_first() -> None:
    hits = [
        SearchHit(id="big", kind="exchange", score=0.9, text="word " * 400, metadata={}),
        SearchHit(id="small", kind="exchange", score=0.8, text="a short memory", metadata={}),
    ]
    assert [h.id for h in within_budget(hits, 1000)] == ["big", "small"]
    assert [h.id for h in within_budget(hits, 100)] == ["small"]
    assert within_budget(hits, 0) == []


def _true_doc_freqs(texts: list[str], query: list[str]) -> dict[str, int]:
    return {t: sum(t in set(terms(text)) for text in texts) for t in query}


def test_term_counts_stay_exact_through_adds_deletes_and_clears(tmp_path: Path) -> None:
    index = LexicalIndex(tmp_path / "lex.sqlite3")
    texts = {f"r{i}": f"bread {'starter ' * (i % 3)}oven number{i % 4} baking baked" for i in range(12)}
    index.add("document", [(i, t, {}) for i, t in texts.items()])
    index.add("document", [(i, t, {}) for i, t in texts.items()])  # re-adding counts nothing twice
    query = terms("bread starter oven number1 bake unseen")
    assert index.doc_freqs("document", query) == _true_doc_freqs(list(texts.values()), query)
    index.delete("document", ["r0", "r1", "r5", "missing"])
    left = [t for i, t in texts.items() if i not in ("r0", "r1", "r5")]
    assert index.doc_freqs("document", query) == _true_doc_freqs(left, query)
    assert index.doc_freqs("exchange", query) == dict.fromkeys(query, 0)  # kinds are counted apart
    index.clear("document")
    assert index.doc_freqs("document", query) == dict.fromkeys(query, 0)


def test_an_index_made_before_term_counts_is_upgraded_on_open(tmp_path: Path) -> None:
    path = tmp_path / "lex.sqlite3"
    index = LexicalIndex(path)
    index.add("exchange", [(f"e{i}", f"marmalade toast {i % 2 and 'jam'}", {}) for i in range(6)])
    # What an index of the previous version looks like: no counts, schema version 0.
    index._db.execute("DELETE FROM df_exchange")
    index._db.execute("PRAGMA user_version = 0")
    index.close()
    reopened = LexicalIndex(path)
    assert reopened.doc_freqs("exchange", ["marmalade", "jam", "toast"]) == {"marmalade": 6, "jam": 3, "toast": 6}
    assert [i for i, _ in reopened.search("exchange", ["jam"], 10)] != []


def test_search_leaves_out_common_terms_past_the_postings_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = LexicalIndex(tmp_path / "lex.sqlite3")
    rows = [(f"c{i}", f"caroline talked about her day {i}", {}) for i in range(20)]
    rows.append(("rare", "caroline took up pottery", {}))
    index.add("exchange", rows)
    query = terms("caroline pottery")
    assert len(index.search("exchange", query, 50)) == 21  # within the budget: every term is searched
    monkeypatch.setattr(term_rules, "POSTINGS_BUDGET", 5)
    assert [i for i, _ in index.search("exchange", query, 50)] == ["rare"]  # the common term is dropped
    # A query of common terms only still searches the rarest of them.
    assert len(index.search("exchange", terms("caroline"), 50)) == 21
    assert index.search("exchange", terms("zeppelin"), 50) == []
