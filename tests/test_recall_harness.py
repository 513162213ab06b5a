"""The retrieval evaluation harness runs on a slice of the dev set, so it cannot rot."""

from __future__ import annotations

import pytest

from bench.recall import DEFAULT_DATA, evaluate, format_table, load_conversations, normalise_evidence
from ocat.memory.embedding.embedders import Embedder


def test_evidence_ids_are_normalised() -> None:
    assert normalise_evidence(["D:11:26", "D8:6; D9:17", "D1:3"]) == {"D11:26", "D8:6", "D9:17", "D1:3"}


def test_the_harness_measures_every_mode_on_a_slice(real_embedder: Embedder) -> None:
    if not DEFAULT_DATA.is_file():
        pytest.fail(f"the dev set is missing: {DEFAULT_DATA}")
    conversations = load_conversations(DEFAULT_DATA)[:2]
    assert all(c.exchanges and c.questions for c in conversations)
    rows = evaluate(conversations, questions=25, off_topic=25)
    assert set(rows) == {"hybrid", "dense", "lexical"}
    for row in rows.values():
        assert row["questions"] > 0
        assert 0 <= row["recall"]["R@1"] <= row["recall"]["R@5"] <= row["recall"]["R@10"] <= 100
        assert row["latency_p50_ms"] > 0 and row["quiet"] is not None
    # The point of hybrid retrieval: it beats dense search alone on the same questions.
    assert rows["hybrid"]["recall"]["R@5"] > rows["dense"]["recall"]["R@5"]
    assert "R@5 by category" in format_table(rows)


def test_on_chats_dev_the_gate_admits_targets_and_stays_quiet(real_embedder: Embedder) -> None:
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
