"""Retrieval with the real all-MiniLM-L6-v2 model: the right memory comes back first."""

from __future__ import annotations

import math

import pytest

from ocat.config.loading import shipped_settings
from ocat.memory import MemoryStore, RetrievalLimits, add_text, admitted, retrieve
from ocat.memory.embedding.embedders import Embedder
from ocat.records import Exchange

LIMITS = RetrievalLimits(exchange_results=3, document_results=3, exchange_threshold=0.3, document_threshold=0.3)
CONVERSATION = [
    ("Which database should the billing service use?", "PostgreSQL, for its transactions and JSONB support."),
    ("What's a good name for my cat?", "How about Miso or Pixel?"),
    ("How do I make my sourdough rise more?", "Keep the starter warm and let the dough proof longer."),
    ("Recommend a hiking trail near Seattle", "Try the Rattlesnake Ledge trail."),
]


def fill(store: MemoryStore) -> list[Exchange]:
    exchanges = [
        Exchange(user_prompt=p, assistant_response=r, thread_id="t", session_id="s", timestamp=float(i))
        for i, (p, r) in enumerate(CONVERSATION)
    ]
    store.add_exchanges(exchanges)
    return exchanges


def test_the_model_gives_unit_vectors_of_384_dimensions(real_embedder: Embedder) -> None:
    [vector] = real_embedder.embed(["hello world"])
    assert len(vector) == 384
    assert math.isclose(sum(x * x for x in vector), 1.0, rel_tol=1e-4)


def test_batching_and_padding_do_not_change_a_vector(real_embedder: Embedder) -> None:
    short = "a short text"
    alone = real_embedder.embed([short])[0]
    padded = real_embedder.embed([short, "a much longer text " * 30])[0]
    assert max(abs(a - b) for a, b in zip(alone, padded)) < 1e-4


def test_paraphrased_questions_find_their_exchange(real_store: MemoryStore) -> None:
    fill(real_store)
    cases = {
        "which DB did we pick for invoices and payments": "Which database should the billing service use?",
        "ideas for naming a kitten": "What's a good name for my cat?",
        "my bread dough is not rising": "How do I make my sourdough rise more?",
    }
    for query, expected in cases.items():
        hits = retrieve(real_store, query, LIMITS)
        assert hits[0].metadata["user_prompt"] == expected, query


def test_documents_and_exchanges_are_merged_by_score(real_store: MemoryStore) -> None:
    fill(real_store)
    add_text(real_store, "The office wifi password rotates every Monday; ask Dana for it.", shipped_settings().chunking)
    hits = retrieve(real_store, "what is the wifi password at the office", LIMITS)
    assert hits[0].kind == "document"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_excluded_ids_are_not_returned(real_store: MemoryStore) -> None:
    exchanges = fill(real_store)
    billing = exchanges[0].exchange_id
    hits = retrieve(real_store, "billing database", LIMITS, exclude_ids={billing})
    assert billing not in {h.id for h in hits}
    assert len([h for h in hits if h.kind == "exchange"]) == 3


def test_the_default_gate_admits_the_relevant_memory_and_stays_quiet_off_topic(real_store: MemoryStore) -> None:
    fill(real_store)
    gate = RetrievalLimits(exchange_results=5, document_results=3, exchange_threshold=0.65, document_threshold=0.7)
    relevant = admitted(retrieve(real_store, "which database did we choose for billing?", gate))
    assert relevant and relevant[0].metadata["user_prompt"] == "Which database should the billing service use?"
    assert admitted(retrieve(real_store, "What did Jon say about his dance studio opening?", gate)) == []
    assert all(0.0 <= h.score <= 1.0 for h in retrieve(real_store, "billing", gate))


def test_scores_are_calibrated_not_raw_cosine(real_store: MemoryStore) -> None:
    fill(real_store)
    [hit] = retrieve(real_store, "a good name for my cat", LIMITS, limit=1)
    query_vector = real_store.embedder.embed(["a good name for my cat"])
    [(dense_id, cosine)] = real_store.nearest("exchange", query_vector, 1)[0].items()
    assert hit.id == dense_id and hit.score != pytest.approx(cosine)
    assert real_store.calibration.source == "dev fit, prompt side"
    assert real_store.exchanges.metadata["calibration_center"] == real_store.calibration.center
