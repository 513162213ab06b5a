"""The retrieval evaluation harness runs on a slice of the dev set, so it cannot rot."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from pathlib import Path

import pytest

from bench.recall import DEFAULT_DATA, evaluate, format_table, load_conversations, normalise_evidence
from ocat.memory.embedding.embedders import Embedder
from tests.support.paths import REPO
from tests.support.run_vectors import vectors_kept_in


@pytest.fixture
def kept_vectors(run_vectors: Path) -> Iterator[Path]:
    """The dev sets' vectors made once in the run, shared with the benches' smoke runs: the model's
    own, bit for bit (ocat.memory.embedding.vector_cache), so the figures are those it gives."""
    with vectors_kept_in(run_vectors):
        yield run_vectors


def test_evidence_ids_are_normalised() -> None:
    assert normalise_evidence(["D:11:26", "D8:6; D9:17", "D1:3"]) == {"D11:26", "D8:6", "D9:17", "D1:3"}


def test_the_harness_measures_every_mode_on_a_slice(real_embedder: Embedder, kept_vectors: Path) -> None:
    if not DEFAULT_DATA.is_file():
        pytest.fail(f"the dev set is missing: {DEFAULT_DATA}")
    conversations = load_conversations(DEFAULT_DATA)[:2]
    assert all(c.exchanges and c.questions for c in conversations)
    # Five off-topic questions a store still measure how often the gate stays quiet (each is
    # asked in three modes of two stores: 25 of them were 120 more searches).
    rows = evaluate(conversations, questions=25, off_topic=5)
    assert set(rows) == {"hybrid", "dense", "lexical"}
    for row in rows.values():
        assert row["questions"] > 0
        assert 0 <= row["recall"]["R@1"] <= row["recall"]["R@5"] <= row["recall"]["R@10"] <= 100
        assert row["latency_p50_ms"] > 0 and row["quiet"] is not None
    # The point of hybrid retrieval: it beats dense search alone on the same questions.
    assert rows["hybrid"]["recall"]["R@5"] > rows["dense"]["recall"]["R@5"]
    assert "R@5 by category" in format_table(rows)


def test_on_chats_dev_the_gate_admits_targets_and_stays_quiet(real_embedder: Embedder, kept_vectors: Path) -> None:
    """The shipped gate's goals on a user's chats with an assistant (docs/RETRIEVAL.md); all
    but precision, which these signals cannot reach."""
    from bench.recall import DEFAULT_MODEL
    from bench.recall_chats import DEFAULT_CHATS, evaluate_chats

    if not DEFAULT_CHATS.is_dir():
        pytest.fail(f"the dev set is missing: {DEFAULT_CHATS}")
    row = evaluate_chats(DEFAULT_CHATS, DEFAULT_MODEL)
    assert row["recall"]["R@5"] >= 90 and row["admitted"] >= 85, row
    # An off-topic question on this mixed-topic store injects nothing, nor do most questions
    # on a subject the user discussed but never this point of it (the store's floor).
    assert row["quiet_offtopic"] >= 95 and row["quiet_near"] >= 50, row
    # Listing more (--results 10) reads further without changing what the chat reads: on this
    # store, 12 of its questions got other hits or verdicts when the listing's read moved them.
    assert row["listed_differs"] == 0, row


def _changing_row(folder: Path, tmp_path: Path) -> dict[str, Any]:
    """`python bench/recall_changing.py --data FOLDER`'s figures."""
    from bench.recall import DEFAULT_MODEL
    from bench.recall_changing import CHANGING_NOW, Table, ask, open_store

    if not folder.is_dir():
        pytest.fail(f"the set is missing: {folder}")
    store, questions, _ = open_store(folder, DEFAULT_MODEL, tmp_path)
    try:
        return Table(ask(store, questions, CHANGING_NOW)).row()
    finally:
        store.close()


def test_on_changing_dev_the_newest_version_is_given_and_never_an_old_one_alone(
    real_embedder: Embedder, kept_vectors: Path, tmp_path: Path,
) -> None:
    """Facts that change (issue 45): the figures docs/RETRIEVAL.md reports for
    `python bench/recall_changing.py`, held so that a change that loses one of them fails here."""
    from bench.recall_changing import DEFAULT_SET

    row = _changing_row(DEFAULT_SET, tmp_path)
    assert row["current_reached"] >= 94.9 and row["outdated_alone"] == 0.0, row
    assert row["history"] >= 87.0 and row["stable"] >= 95.0, row
    assert row["quiet_offtopic"] >= 93.3 and row["quiet_near"] >= 50.0, row


# bench/data/changing-own and changing-own2 were written by helpers that never read ocat's code,
# each with its own persona (a nurse in Glasgow; a developer in Montreal), after every constant
# was chosen. Held here: current reached, outdated alone, history, stable, quiet off-topic, quiet
# near (docs/RETRIEVAL.md, "Two independently written sets"). Their first runs differed only in
# history (90.9 and 63.6), before the newest versions a question about the past brings were given
# after the memories found on their own.
INDEPENDENT_SETS = {
    "changing-own": (100.0, 0.0, 100.0, 91.7, 100.0, 66.7),
    # Short of one goal here: off-topic quiet (one question of 16: "do I need a permit to go
    # fishing in Quebec?" finds the basement's building permit).
    "changing-own2": (90.0, 0.0, 81.8, 100.0, 93.8, 37.5),
}


@pytest.mark.parametrize("name", sorted(INDEPENDENT_SETS))
def test_on_the_independently_written_sets_the_figures_hold(
    name: str, real_embedder: Embedder, kept_vectors: Path, tmp_path: Path,
) -> None:
    """Issue 45's figures on sets written apart from the code: none may fall."""
    current, outdated, history, stable, quiet_off, quiet_near = INDEPENDENT_SETS[name]
    row = _changing_row(REPO / "bench" / "data" / name, tmp_path)
    assert row["current_reached"] >= current and row["outdated_alone"] <= outdated, row
    assert row["history"] >= history and row["stable"] >= stable, row
    assert row["quiet_offtopic"] >= quiet_off and row["quiet_near"] >= quiet_near, row


def test_the_folds_fast_objective_agrees_with_the_plain_replay() -> None:
    """bench/recall_folds.py fits the gate on arrays (`_Outcomes`); they must score every gate as
    the plain replay of the chat's rule (`objective` over `Gate.shown`) does."""
    import random

    from bench.recall_folds import Asked, Gate, Hit, _Outcomes, objective

    rng = random.Random(7)
    asked = []
    for n in range(60):
        kind = ("recall", "offtopic", "near")[n % 3]
        hits = [
            Hit(f"q{n}-h{k}", z=rng.uniform(0.2, 1.6), tokens=rng.randint(50, 900), context_of=None,
                found=frozenset({f"q{n}-h{k}"}) if kind == "recall" and rng.random() < 0.3 else frozenset(),
                right=False)
            for k in range(10)
        ]
        hits.sort(key=lambda h: h.z, reverse=True)
        asked.append(Asked("chats" if n % 2 else "locomo", "f", kind, hits, need=1,
                           floor=None if n % 4 == 0 else rng.uniform(0.3, 0.7), budget=1500))
    seen = set()
    for best_margin in (0.3, 0.5):
        table = _Outcomes(asked, best_margin)
        for point, floor_margin in ((0.5, 0.0), (0.8, 0.1), (1.1, 0.3), (1.4, 0.2)):
            fast = table.objective(point, floor_margin)
            assert fast == pytest.approx(objective(asked, Gate(point, floor_margin, best_margin)), abs=0.25)  # rounding
            seen.add(round(fast))
    assert len(seen) > 2  # the gates differ: the comparison is not between constants
