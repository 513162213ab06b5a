"""Retrieval with the real all-MiniLM-L6-v2 model: the right memory comes back first."""

from __future__ import annotations

import math

from ocat.chunking import ChunkingOptions
from ocat.memory import MemoryStore, RetrievalLimits, add_text, admitted, retrieve
from ocat.models import Exchange

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


def test_the_model_gives_unit_vectors_of_384_dimensions(real_embedder) -> None:
    [vector] = real_embedder.embed(["hello world"])
    assert len(vector) == 384
    assert math.isclose(sum(x * x for x in vector), 1.0, rel_tol=1e-4)


def test_batching_and_padding_do_not_change_a_vector(real_embedder) -> None:
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
    add_text(real_store, "The office wifi password rotates every Monday; ask Dana for it.", ChunkingOptions())
    hits = retrieve(real_store, "what is the wifi password at the office", LIMITS)
    assert hits[0].kind == "document"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_excluded_ids_are_not_returned(real_store: MemoryStore) -> None:
    exchanges = fill(real_store)
    billing = exchanges[0].exchange_id
    hits = retrieve(real_store, "billing database", LIMITS, exclude_ids={billing})
    assert billing not in {h.id for h in hits}
    assert len([h for h in hits if h.kind == "exchange"]) == 3


def test_the_gate_admits_only_hits_at_or_above_their_threshold(real_store: MemoryStore) -> None:
    fill(real_store)
    strict = RetrievalLimits(exchange_results=4, document_results=0, exchange_threshold=0.99, document_threshold=0.99)
    assert admitted(retrieve(real_store, "billing database", strict)) == []
    loose = RetrievalLimits(exchange_results=4, document_results=0, exchange_threshold=0.0, document_threshold=0.0)
    assert len(admitted(retrieve(real_store, "billing database", loose))) == 4
