"""Newer facts first: the model reads past exchanges newest first, and is told that the newer
of two disagreeing memories is current (ocat.chat.messages.reading_order, docs/RETRIEVAL.md)."""

from __future__ import annotations

from typing import Any

from ocat.chat.messages import MEMORY_PREAMBLE, memory_message, reading_order
from ocat.memory import RetrievalLimits, admitted, retrieve
from ocat.records import Exchange, SearchHit

DAY = 86400.0


def hit(hit_id: str, score: float, when: float | None, *, kind: str = "exchange", context_of: str | None = None
        ) -> SearchHit:
    metadata: dict[str, Any] = {"thread_id": f"thread-{hit_id}"}
    if when is not None:
        metadata["timestamp" if kind == "exchange" else "date_added"] = when
    return SearchHit(id=hit_id, kind=kind, score=score, text=f"text of {hit_id}", metadata=metadata,  # type: ignore[arg-type]
                     threshold=0.65, context_of=context_of, rank=score)


def test_exchanges_are_read_newest_first_with_their_context_and_documents_after() -> None:
    hits = [
        hit("old-best", 0.95, 1 * DAY),
        hit("doc", 0.9, 5 * DAY, kind="document"),
        hit("old-best-next", 0.9, 1 * DAY + 60, context_of="old-best"),
        hit("newer", 0.8, 3 * DAY),
        hit("undated", 0.7, None),
        hit("same-day-a", 0.75, 2 * DAY),
        hit("same-day-b", 0.72, 2 * DAY),
    ]
    order = [h.id for h in reading_order(hits)]
    assert order == ["newer", "same-day-a", "same-day-b", "old-best", "old-best-next", "undated", "doc"]


def test_the_memory_message_follows_the_reading_order_and_says_the_newer_is_current() -> None:
    message = memory_message([hit("aaaaaaaa-old", 0.95, 1 * DAY), hit("bbbbbbbb-new", 0.8, 30 * DAY)])
    assert message is not None
    content = message["content"]
    assert content.index('id="bbbbbbbb"') < content.index('id="aaaaaaaa"')
    assert content.startswith(MEMORY_PREAMBLE) and "the newer one is current" in MEMORY_PREAMBLE


def test_a_fact_that_changed_reaches_the_model_newest_first(real_store: Any) -> None:
    """The old version says more (it ranks first); the correction is what the model reads first."""
    first = Exchange(
        user_prompt="when is the kitchen renovation starting? the contractor gave us a date",
        assistant_response=(
            "Great, so the contractor, Rénovations Dubé, plans to start the kitchen renovation on "
            "March 3rd. Demolition takes the first week, then plumbing and electrical rough-in, "
            "cabinets in week three and the quartz counters after templating. Plan to eat out or set "
            "up a temporary kitchen with a hot plate and the microwave in the living room."
        ),
        thread_id="kitchen-1", session_id="kitchen-1", exchange_id="march-kitchen", timestamp=1_738_000_000.0,
    )
    later = Exchange(
        user_prompt="kitchen renovation update: the start got pushed, the contractor now says april 14",
        assistant_response=(
            "Noted: the kitchen renovation now starts on April 14th instead of March 3rd. Move the "
            "temporary kitchen plan by six weeks."
        ),
        thread_id="kitchen-2", session_id="kitchen-2", exchange_id="april-kitchen", timestamp=1_741_000_000.0,
    )
    unrelated = Exchange(
        user_prompt="how long should a sourdough starter rest before baking?",
        assistant_response="Feed it and let it peak, usually four to eight hours at room temperature.",
        thread_id="bread", session_id="bread", exchange_id="bread", timestamp=1_742_000_000.0,
    )
    real_store.add_exchanges([first, later, unrelated])
    limits = RetrievalLimits(exchange_results=5, document_results=5, exchange_threshold=0.65, document_threshold=0.7)
    shown = admitted(retrieve(real_store, "when does the kitchen renovation start?", limits))
    assert {"march-kitchen", "april-kitchen"} <= {h.id for h in shown}
    message = memory_message(shown)
    assert message is not None
    assert message["content"].index('id="april-ki"') < message["content"].index('id="march-ki"')
