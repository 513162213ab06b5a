"""bench/tool_recall.py's simulated model, on a tiny store with the fake embedder, so the bench
cannot silently break: it searches through the real tool only when nothing injected is relevant,
with the question's date range when it names one, and counts what reached the model."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bench.recall_folds import Asked, Hit, _hits, _z
from bench.tool_recall import Case, Costs, ToolGate, call_tool, question_range, score, searches_kept, shipped_gate, simulate
from ocat.config.loading import load_settings
from ocat.memory import MemoryStore, RetrievalLimits
from ocat.records import Exchange
from ocat.text.tokens import estimate_tokens

# Gates that inject everything the chat's top 5 holds, and nothing at all (z never reaches 99).
OPEN = ToolGate(-99.0, -99.0, 99.0, 5)
SHUT = ToolGate(99.0, 99.0, 99.0, 5)
COSTS = Costs(system=80, schemas=600)


def stored(store: MemoryStore) -> None:
    day = datetime(2025, 3, 10, 12).timestamp()
    store.add_exchanges([
        Exchange(user_prompt="Which tiles for the kitchen floor?", assistant_response="Grey slate tiles, 30 cm.",
                 thread_id="kitchen", session_id="s1", exchange_id="tiles", timestamp=day),
        Exchange(user_prompt="How long to proof the sourdough?", assistant_response="Twelve hours in the fridge.",
                 thread_id="bread", session_id="s2", exchange_id="bread", timestamp=day + 40 * 86400),
        Exchange(user_prompt="Which ferry to the island?", assistant_response="The 9:10 boat from the harbour.",
                 thread_id="trip", session_id="s3", exchange_id="ferry", timestamp=day + 80 * 86400),
    ])


def asked_of(store: MemoryStore, question: str, evidence: set[str], kind: str = "recall") -> tuple[Asked, Any]:
    """The question asked as recall_folds asks it (ranked hits with their fused scores)."""
    limits = RetrievalLimits.from_settings(load_settings(env={}).vector_store, results=10)
    found, floor = _hits(store, question, limits, None)
    hits = [Hit(h.id, _z(store, floor, h.score), estimate_tokens(h.text), h.context_of, frozenset({h.id} & evidence),
                h.id in evidence) for h in found]
    return Asked("chats", "Jan", kind, hits, max(1, len(evidence)), floor, 1500), (lambda i: {i} & evidence)


def ask(store: MemoryStore, question: str, evidence: set[str], kind: str = "recall") -> Case:
    cases: list[Case] = []
    asked, covers = asked_of(store, question, evidence, kind)
    hook = simulate(cases, [OPEN, SHUT], load_settings(env={}), {"chats": datetime(2025, 7, 1)}, shipped_gate())
    hook(store, {"question": question}, asked, covers)
    return cases[0]


def test_the_question_range_names_what_the_question_says() -> None:
    asked_on = datetime(2024, 1, 5)
    assert question_range("When did Melanie go camping in June?", asked_on) == ("2023-06-01", "2023-07-01")
    assert question_range("What did she paint in July 2023?", asked_on) == ("2023-07-01", "2023-08-01")
    assert question_range("What did she show on October 13, 2023?", asked_on) == ("2023-10-13", "2023-10-14")
    assert question_range("What happened on 7 July, 2023?", asked_on) == ("2023-07-07", "2023-07-08")
    assert question_range("What did he do the week before August 3, 2023?", asked_on) == ("2023-07-27", "2023-08-04")
    assert question_range("Her puppy, two weeks before August 11, 2023?", asked_on) == ("2023-07-28", "2023-08-12")
    assert question_range("Where did he travel last year?", asked_on) == ("2023-01-01", "2024-01-01")
    assert question_range("How many times to the beach in 2023?", asked_on) == ("2023-01-01", "2024-01-01")
    assert question_range("Where did Caroline move from 4 years ago?", asked_on) is None
    assert question_range("which tiles did we pick for the kitchen?", asked_on) is None


def test_the_model_searches_only_when_nothing_injected_is_relevant(store: MemoryStore) -> None:
    stored(store)
    case = ask(store, "which tiles for the kitchen floor?", {"tiles"})
    # Its plain search ran through the real tool, and found the tiles.
    first = case.plain[frozenset()]
    assert first.ids and first.ids[0] == "tiles" and first.top5 == {"tiles"} and first.covers == {"tiles"}
    assert first.tokens > 20 and first.whole and first.dropped == 0
    assert case.dated is None and not case.ranged
    assert case.live_matches  # the replayed gate injects what the chat's own recall does
    # The open gate injects the tiles: no call, reached by injection, only the memory block costs.
    opened = score([case], OPEN, COSTS)
    assert opened["injected"] == opened["reached"] == 100.0 and opened["calls"] == 0.0
    assert opened["tokens"] == case.preamble + sum(case.block.values())
    assert opened["billed"] == COSTS.system + COSTS.schemas + case.prompt + opened["tokens"] + 12
    # The shut gate injects nothing: the model searches, and the tiles reach it through the tool.
    shut = score([case], SHUT, COSTS)
    assert shut["injected"] == 0.0 and shut["reached"] == 100.0 and shut["calls"] == 100.0
    assert shut["tokens"] == first.tokens + 8 and shut["R@5 called"] == 100.0
    # Without tools nothing reaches the model when nothing is injected.
    assert score([case], SHUT, COSTS, tools=False)["reached"] == 0.0


def test_a_search_marks_what_was_injected_and_a_dated_question_is_searched_in_its_range(store: MemoryStore) -> None:
    stored(store)
    # The bread is the evidence, the open gate injects all three: relevant, so no call for it.
    case = ask(store, "how long to proof the sourdough in April 2025?", {"bread"})
    assert case.dated == ("2025-04-01", "2025-05-01")
    assert set(case.plain) == {frozenset()} and set(case.ranged) == {frozenset()}
    ranged = case.ranged[frozenset()]
    assert ranged.ids == ("bread",)  # only what April holds
    assert score([case], SHUT, COSTS)["reached"] == 100.0

    # Asked about the ferry with the tiles as the only evidence: everything injected is irrelevant
    # to the oracle (the tiles are not in the top results' relevant set), so it searches with them marked.
    case = ask(store, "which ferry to the island?", {"nowhere"})
    injected = frozenset(h.id for h in OPEN.shown(case.asked))
    assert injected and injected in case.plain
    marked = case.plain[injected]
    assert marked.covers == frozenset() and marked.tokens < case.plain[frozenset()].tokens  # marked, not repeated
    assert score([case], OPEN, COSTS)["reached"] == 0.0


def test_an_off_topic_question_is_quiet_only_when_nothing_is_injected(store: MemoryStore) -> None:
    stored(store)
    case = ask(store, "a sixteen week marathon plan?", set(), kind="offtopic")
    assert score([case], SHUT, COSTS)["quiet off"] == 100.0
    assert score([case], SHUT, COSTS)["off tokens"] == 0.0
    if OPEN.shown(case.asked):
        assert score([case], OPEN, COSTS)["quiet off"] == 0.0


def test_the_tool_runs_while_searches_are_kept_and_a_second_call_reuses_the_first(store: MemoryStore) -> None:
    # The bench's stand-in for `search` once refused the tool's `project` argument (TypeError):
    # `--asked FILE` failed at its first question. It takes whatever the tool passes now.
    stored(store)
    settings = load_settings(env={})
    with searches_kept() as kept:
        first = call_tool(store, settings, {"query": "kitchen floor tiles"}, frozenset(), lambda i: {i} & {"tiles"})
        again = call_tool(store, settings, {"query": "kitchen floor tiles"}, frozenset(), lambda i: {i} & {"tiles"})
    assert first.ids[0] == "tiles" and again == first
    assert len(kept) == 1  # the second call's search came from the first
