"""The CLI shows what the chat would retrieve: the same ranking, the same verdicts, hit by hit.

`--query-vector-store` once ranked with its own pool (`--results 10` searched deeper than
the chat) and re-sorted by own score (a neighbour lifted as context fell down the list),
so its top 5 was not the chat's. Now it lists the chat's own list first: what the chat gives
the model, in the chat's order (a neighbour right behind its memory), then the rest of it by
score; then what `--results` asks beyond it, marked as never given to the model.
"""

from __future__ import annotations

from typing import Any

import pytest

from ocat.config.loading import load_settings
from ocat.memory import MemoryStore, StoreLocation, add_text
from ocat.memory.retrieval.retrieve import RetrievalLimits, retrieve_any
from ocat.records import Exchange
from ocat.chat.session import ChatSession
from tests.support.cli import Cli

# Three threads where a subject is raised in one exchange and answered in the next (so
# neighbours are lifted as context), with subjects that come back across threads.
THREADS = {
    "kitchen": [
        ("We want to redo the kitchen this spring.", "A spring renovation: start with the layout and the budget."),
        ("What counter top would you suggest?", "Quartz: it resists stains and needs no sealing."),
        ("And the budget?", "Plan about 18,000 euros, with ten percent kept back for surprises."),
        ("Who should fit the cabinets?", "Ask two local joiners for quotes; Berg & Sons fitted your hallway."),
        ("The floor tiles, which colour?", "A warm grey hides crumbs and matches the quartz."),
        ("When can the work start?", "Book the joiner for the first week of April."),
    ],
    "rust": [
        ("I keep fighting the borrow checker in my Rust parser.", "Share the function: it is usually a lifetime."),
        ("It says the reference does not live long enough.", "Return an owned String instead of a &str there."),
        ("How do I make the parser faster?", "Avoid cloning tokens; use slices of the input and a lexer."),
        ("Which crate for parsing?", "nom for combinators, or pest if you prefer a grammar file."),
        ("Error messages are cryptic.", "Use miette or ariadne for spans and labels."),
    ],
    "travel": [
        ("We fly to Lisbon in May.", "Lovely in May: warm, and before the summer crowds."),
        ("Where should we stay?", "Alfama for the old town, or Príncipe Real for quiet evenings."),
        ("Is the tram worth it?", "Tram 28 is scenic but crowded; go early in the morning."),
        ("A day trip?", "Sintra, by train from Rossio: forty minutes."),
        ("What about food?", "Try pastéis de nata at Manteigaria and grilled sardines in June."),
        ("And the budget for the kitchen trip to IKEA on the way back?", "Keep it under 2,000 euros."),
    ],
}
DOCUMENTS = [
    "Kitchen renovation checklist: measure the room, choose counter tops (quartz or granite), "
    "order cabinets eight weeks ahead, book the electrician before the joiner.",
    "Rust notes: lifetimes tie references to their owners; prefer owned values across API "
    "boundaries; nom and pest are the common parser crates.",
]
QUERIES = [
    "what counter top did we pick for the kitchen?",
    "how much is the kitchen budget",
    "which crate should I use to parse in Rust",
    "where to stay in Lisbon",
    "the borrow checker complains about a reference",
    "day trip from Lisbon",
    "who fits the cabinets",
    "a recipe for lemon cake",  # nothing about it: the gate should stay quiet
]


def _fill(path: Any, embedder: Any) -> None:
    store = MemoryStore.open(StoreLocation(path=path), embedder, name="default")
    try:
        exchanges = [
            Exchange(user_prompt=p, assistant_response=r, thread_id=thread, session_id="s",
                     exchange_id=f"{thread}-{n}", timestamp=1_760_000_000.0 + 3600 * n)
            for thread, pairs in THREADS.items() for n, (p, r) in enumerate(pairs)
        ]
        store.add_exchanges(exchanges)
        for text in DOCUMENTS:
            add_text(store, text, load_settings(env={}).chunking)
    finally:
        store.close()


def _key(hit: dict[str, Any]) -> tuple[Any, ...]:
    return (hit["id"], hit["score"], hit["admitted"], hit["context_of"], hit["why"])


@pytest.mark.slow
def test_the_cli_lists_the_chats_retrieval_hit_by_hit(cli: Cli, real_embedder: Any) -> None:
    _fill(cli.store_path, real_embedder)
    run = cli("--query-vector-store", "-", "--results", "12", "--output", "json", input="\n".join(QUERIES) + "\n")
    assert run.returncode == 0, run.stderr
    listed = {line["result"]["query"]: line["result"]["results"] for line in run.json_lines()}

    settings = load_settings(env={})
    store = MemoryStore.open(StoreLocation(path=cli.store_path), real_embedder, name="default")
    try:
        from ocat.memory.retrieval.across_stores import StoreHit
        from ocat.operations.search import hit_record, reasons, shown_order

        chat = ChatSession(settings, store=store)
        lifted = 0
        for query in QUERIES:
            # What a chat's first turn retrieves (no history yet: one search, with the prompt),
            # listed as every face lists it: what the chat gives the model first, in its order.
            ranked = retrieve_any(store, [query], RetrievalLimits.from_settings(settings.vector_store))
            hits = [f.hit for f in shown_order([StoreHit("default", h) for h in ranked])]
            mine = [hit_record(h, why=w) for h, w in zip(hits, reasons(hits))]
            cli_hits = listed[query]
            assert [_key(h) for h in cli_hits[: len(mine)]] == [_key(h) for h in mine], query
            # Every row marked given comes before every row that is not; those follow by score.
            flags = [h["admitted"] for h in cli_hits]
            assert flags == sorted(flags, reverse=True), query
            rest = [h["score"] for h in cli_hits[sum(flags) : len(mine)]]
            assert rest == sorted(rest, reverse=True), query
            # Past the chat's list: more of the same ranking, never given to the model.
            assert all(not h["admitted"] and h["why"] == "past the chat's count" for h in cli_hits[len(mine):])
            # What the chat gives the model is exactly what the CLI marks as given.
            given = [h.id for h in chat.turn(query).recall()]
            assert given == [h["id"] for h in cli_hits if h["admitted"]], query
            lifted += sum(1 for h in mine if h["context_of"])
        assert lifted, "the data should make some neighbour context, or the test proves less than it says"
        assert not [h for h in listed["a recipe for lemon cake"] if h["admitted"]]
    finally:
        store.close()
