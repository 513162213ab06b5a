"""The relevance gate on a user's chats with an assistant (real all-MiniLM-L6-v2 weights).

Threads hop between unrelated subjects and answers are long: a memory reaches the model
only when it is relevant on its own (or continues the subject of one that is), and an
off-topic question gets nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ocat.memory import MemoryStore, RetrievalLimits, admitted, retrieve
from ocat.memory.retrieval.given import within_budget
from ocat.operations.search import reasons
from ocat.records import Exchange

CHAT_LIMITS = RetrievalLimits(exchange_results=5, document_results=5, exchange_threshold=0.65, document_threshold=0.7)

# One thread, three unrelated subjects, in the order a user might raise them.
MIXED_THREAD = [
    (
        "my sister just adopted a dog, a little beagle she named Pepper. any tips for her first week?",
        "Congratulations to your sister! For Pepper's first week: keep a fixed routine for meals and walks, "
        "give her a quiet crate or bed, start house training at once with praise after every success, and "
        "keep visitors few. Beagles follow their nose, so a secure harness and a fenced yard help.",
    ),
    (
        "totally unrelated but what's the capital of australia? i always say sydney",
        "It's Canberra. Sydney is the largest city, but Canberra was chosen as a compromise between Sydney "
        "and Melbourne and has been the capital since 1913. Parliament House is there.",
    ),
    (
        "how long do i boil an egg for a runny yolk?",
        "About 6 minutes in gently boiling water for a large egg straight from the fridge, then into cold "
        "water for a minute. Seven minutes gives a jammy yolk, nine to ten a firm one.",
    ),
]

# A second thread that stays on one subject: its exchanges continue each other.
KITCHEN_THREAD = [
    (
        "we're renovating the kitchen. the contractor quoted $38,000 for cabinets, counters and labour",
        "That's within the usual range for a mid-size kitchen. Ask for the quote broken down by cabinets, "
        "countertops, plumbing and labour, and check what is excluded (permits, disposal, appliances).",
    ),
    (
        "for the kitchen counters we picked white quartz instead of granite",
        "Good choice for a kitchen counter: quartz needs no sealing, resists stains, and white quartz keeps "
        "the kitchen bright. Avoid hot pans directly on it and use a trivet.",
    ),
]


def _store(tmp_path: Path, embedder: object, threads: dict[str, list[tuple[str, str]]]) -> MemoryStore:
    from ocat.memory import StoreLocation

    store = MemoryStore.open(StoreLocation(path=tmp_path / "store"), embedder, name="gate")  # type: ignore[arg-type]
    exchanges = [
        Exchange(user_prompt=p, assistant_response=r, thread_id=thread, session_id=thread, timestamp=1.7e9 + 60 * n)
        for thread, pairs in threads.items()
        for n, (p, r) in enumerate(pairs)
    ]
    store.add_exchanges(exchanges)
    return store


def _injected(store: MemoryStore, question: str) -> list[str]:
    """The user prompts of what a chat turn would give the model."""
    hits = within_budget(admitted(retrieve(store, question, CHAT_LIMITS)), 1500)
    return [h.metadata["user_prompt"] for h in hits]


@pytest.fixture
def mixed_store(tmp_path: Path, real_embedder: object) -> MemoryStore:
    store = _store(tmp_path, real_embedder, {"mixed": MIXED_THREAD, "kitchen": KITCHEN_THREAD})
    yield store
    store.close()


def test_an_unrelated_neighbour_of_a_strong_hit_is_not_injected(mixed_store: MemoryStore) -> None:
    hits = retrieve(mixed_store, "what is my sister's dog called?", CHAT_LIMITS)
    assert hits[0].metadata["user_prompt"].startswith("my sister just adopted a dog")
    assert hits[0].admitted and hits[0].score >= 0.65
    capital = next(h for h in hits if "capital of australia" in h.metadata["user_prompt"])
    # The next exchange of the thread is about something else: no lift, no place as context.
    assert capital.context_of is None
    assert not capital.admitted
    assert capital.score < 0.65
    assert _injected(mixed_store, "what is my sister's dog called?") == [MIXED_THREAD[0][0]]


def test_an_off_topic_question_on_a_mixed_topic_store_injects_nothing(mixed_store: MemoryStore) -> None:
    for question in (
        "how do I change the inner tube of a bike tire?",
        "what's a good python library for parsing dates?",
        "explain how a heat pump works in winter",
    ):
        assert _injected(mixed_store, question) == [], question


def test_each_question_gets_its_own_subject(mixed_store: MemoryStore) -> None:
    assert _injected(mixed_store, "what is the capital city of australia?") == [MIXED_THREAD[1][0]]
    assert _injected(mixed_store, "how many minutes for a soft boiled egg?") == [MIXED_THREAD[2][0]]


def test_a_neighbour_that_continues_the_subject_comes_as_context_with_its_own_score(
    mixed_store: MemoryStore,
) -> None:
    hits = retrieve(mixed_store, "how much was the contractor's quote for the renovation?", CHAT_LIMITS)
    quote = hits[0]
    assert "contractor quoted" in quote.metadata["user_prompt"] and quote.admitted
    counters = next(h for h in hits if "white quartz" in h.metadata["user_prompt"])
    why = dict(zip((h.id for h in hits), reasons(hits)))
    if counters.context_of is not None:
        # Shown with the quote, never as a memory of its own: its score is its own.
        assert counters.context_of == quote.id
        assert counters.admitted and why[counters.id] == "next to #1 in its thread"
        assert counters.score < quote.score
    else:
        assert why[counters.id] in {"relevant", "far weaker than #1"} or why[counters.id].startswith("below threshold")


def test_reasons_name_the_verdict_of_every_hit() -> None:
    from ocat.records import SearchHit

    def hit(i: str, score: float, **kw: object) -> SearchHit:
        return SearchHit(id=i, kind="exchange", score=score, text=i, metadata={}, threshold=0.65, **kw)  # type: ignore[arg-type]

    hits = [
        hit("a", 0.95),
        hit("b", 0.30, context_of="a", with_admitted=True),
        hit("c", 0.70, outranked=True),
        hit("d", 0.40),
        hit("e", 0.20, context_of="zzzzzzzzzz", with_admitted=False),
    ]
    assert reasons(hits) == [
        "relevant", "next to #1 in its thread", "far weaker than #1", "below threshold 0.65",
        "next to zzzzzzzz in its thread, not given",
    ]
    assert [h.admitted for h in hits] == [True, True, False, False, False]
    # Context never travels without its memory, even when the budget drops the memory.
    assert within_budget([hits[1]], 1500) == []


def test_a_list_shows_what_is_given_first_in_the_chats_order_then_the_rest_by_score() -> None:
    from ocat.memory.retrieval.across_stores import StoreHit
    from ocat.operations.search import reasons, shown_order
    from ocat.records import SearchHit

    def hit(i: str, score: float, **kw: object) -> StoreHit:
        return StoreHit("default", SearchHit(id=i, kind="exchange", score=score, text=i, metadata={},  # type: ignore[arg-type]
                                             threshold=0.65, **kw))

    # The chat's order: a neighbour ranks by what it inherits, so a 0.06 one stands above a 0.10.
    ranked = [
        hit("best", 0.97),
        hit("far", 0.78, outranked=True),
        hit("neighbour", 0.06, context_of="best", with_admitted=True),
        hit("low", 0.10),
        hit("second", 0.70),
        hit("lower", 0.30),
        hit("more", 0.50, beyond=True),
    ]
    shown = [f.hit for f in shown_order(ranked)]
    assert [h.id for h in shown] == ["best", "neighbour", "second", "far", "lower", "low", "more"]
    assert reasons(shown) == [
        "relevant", "next to #1 in its thread", "relevant", "far weaker than #1", "below threshold 0.65",
        "below threshold 0.65", "past the chat's count",
    ]
    assert [h.admitted for h in shown] == [True, True, True, False, False, False, False]
