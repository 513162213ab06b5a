"""A time the prompt names steers the search (docs/RETRIEVAL.md, "Time in the question"): a memory
of that time comes first, and the user is told; a prompt that names none ranks exactly as before."""

from __future__ import annotations

import sys
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

import pytest

from ocat.config.loading import load_settings
from ocat.memory import MemoryStore, RetrievalLimits, admitted, retrieve
from ocat.memory.retrieval.filters import Condition, Filters
from ocat.memory.retrieval.retrieve import retrieve_any
from ocat.operations.search import search, used_memories
from ocat.records import Exchange

NOW = datetime(2025, 7, 1, 12, 0, tzinfo=timezone.utc)
SETTINGS = load_settings(env={}).vector_store
CHAT = RetrievalLimits.from_settings(SETTINGS)


def _at(day: str) -> float:
    return datetime.fromisoformat(day).replace(hour=15, tzinfo=timezone.utc).timestamp()


# Two exchanges on one subject, months apart (the February one says more of the question's words),
# and others from every month, so that a month leaves most of the store outside it.
HISTORY = [
    ("2025-02-14", "grout", "which grout should we choose for the tiles?", "Warm white grout for the tiles."),
    ("2025-04-20", "grout-again", "which grout should we choose for the tiles after all?", "Light grey grout for the tiles."),
    ("2025-01-10", "bread", "my sourdough starter is slow in winter", "Keep it warm, near 26 degrees."),
    ("2025-03-05", "finger", "i hurt my finger climbing", "Rest it two weeks, then tape it."),
    ("2025-05-12", "tickets", "museum tickets in mexico city", "Book them online a week ahead."),
    ("2025-06-02", "cat", "my cat is overweight", "Half a cup of food a day, weighed."),
    ("2025-06-20", "shoes", "climbing shoes size", "Snug, toes slightly curled."),
]


def _fill(store: MemoryStore) -> None:
    store.add_exchanges([
        Exchange(user_prompt=prompt, assistant_response=answer, thread_id=key, session_id=key,
                 exchange_id=key, timestamp=_at(day))
        for day, key, prompt, answer in HISTORY
    ])


def _ids(hits: list[Any]) -> list[str]:
    return [h.id for h in hits]


def test_the_times_come_from_the_lexical_index_and_chroma_fills_what_it_lacks(store: MemoryStore) -> None:
    from ocat.memory.retrieval.retrieve import _KindSearch

    _fill(store)
    assert store.threads.times(["grout", "cat", "nothing"]) == {"grout": _at("2025-02-14"), "cat": _at("2025-06-02")}
    store.lexical.delete("exchange", ["cat"])  # an index that lags behind Chroma
    search = _KindSearch(store, "exchange", [], None, 1, 0.5, CHAT, (), "hybrid")
    assert search.dates(["grout", "cat"]) == {"grout": _at("2025-02-14"), "cat": _at("2025-06-02")}


def test_a_memory_of_the_named_time_comes_first(store: MemoryStore) -> None:
    _fill(store)
    plain = retrieve(store, "which grout did we choose for the tiles?", CHAT, now=NOW)
    assert _ids(plain)[0] == "grout"
    dated = retrieve(store, "which grout did we choose for the tiles in april?", CHAT, now=NOW)
    assert _ids(dated)[0] == "grout-again"
    first = dated[0]
    assert first.admitted
    assert first.dated == "memories dated 2025-04-01..2025-04-30, from 'in april' ranked higher"
    # A memory of another time is still there, with its own score and no such words.
    other = next(h for h in dated if h.id == "grout")
    assert other.dated == ""
    # Seen from another "now", the same words name another April: nothing of it is in the store.
    later = retrieve(store, "which grout did we choose for the tiles in april?", CHAT,
                     now=datetime(2026, 7, 1, tzinfo=timezone.utc))
    assert _ids(later)[0] == "grout" and not any(h.dated for h in later)


def test_restricting_keeps_to_the_time_unless_nothing_there_is_relevant(store: MemoryStore) -> None:
    _fill(store)
    restrict = replace(CHAT, time_policy="restrict")
    dated = retrieve(store, "which grout did we choose for the tiles in april?", restrict, now=NOW)
    assert _ids(dated)[0] == "grout-again" and "grout" not in _ids(dated)
    assert dated[0].dated == "only memories dated 2025-04-01..2025-04-30, from 'in april'"
    # In May nothing is about grout: every date is searched, and the hits say why.
    may = retrieve(store, "which grout did we choose for the tiles in may?", restrict, now=NOW)
    assert _ids(may)[0] == "grout"
    assert may[0].dated == "nothing relevant dated 2025-05-01..2025-05-31, from 'in may', so memories of any date"


@pytest.mark.parametrize(
    "prompt",
    [
        "which grout did we choose for the tiles?",
        "may i ask about my sourdough starter",  # "may" is not a month here
        "the second pair of climbing shoes",
        "my cat is overweight, now what",
        "1/2 cup of food for the cat",
    ],
)
def test_a_prompt_without_a_time_ranks_exactly_as_before(
    store: MemoryStore, prompt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fill(store)
    before = retrieve(store, prompt, replace(CHAT, time_policy="off"), now=NOW)
    listed = RetrievalLimits.from_settings(SETTINGS, results=7)
    before_listed = retrieve(store, prompt, replace(listed, time_policy="off"), now=NOW)
    # dateparser cannot even be imported now: a prompt without a time never needs it.
    for name in [m for m in sys.modules if m == "dateparser" or m.startswith("dateparser.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "dateparser", None)
    assert retrieve(store, prompt, CHAT, now=NOW) == before
    assert retrieve(store, prompt, listed, now=NOW) == before_listed
    assert retrieve_any(store, [prompt, f"earlier prompt\n{prompt}"], CHAT, now=NOW) == retrieve_any(
        store, [prompt, f"earlier prompt\n{prompt}"], replace(CHAT, time_policy="off"), now=NOW
    )
    assert not any(h.dated for h in before)


def test_a_time_that_holds_every_memory_moves_nothing(store: MemoryStore) -> None:
    _fill(store)
    # Every memory is from 2025: "this year" tells none of them apart, so no score moves.
    prompt = "which grout did we choose for the tiles this year?"
    off = retrieve(store, prompt, replace(CHAT, time_policy="off"), now=NOW)
    on = retrieve(store, prompt, CHAT, now=NOW)
    assert on == off


def test_only_the_prompt_is_read_for_a_time(store: MemoryStore) -> None:
    """The chat's second query (earlier prompts, then this one) does not carry an old prompt's time."""
    _fill(store)
    hits = retrieve_any(store, ["grout colour for the kitchen tiles?", "what did we do in april\ngrout colour?"],
                        CHAT, now=NOW)
    assert not any(h.dated for h in hits)


def test_explicit_dates_win_over_the_words(store: MemoryStore) -> None:
    """The model's search_memory `after`/`before` (and --where date...) are a filter on dates: the
    words are then not read."""
    _fill(store)
    february = Filters((Condition("date", "$gte", _at("2025-02-01")), Condition("date", "$lt", _at("2025-03-01"))))
    found = search([store], "grout colour for the kitchen tiles in april", SETTINGS, filters=february, now=NOW)
    assert _ids(found.hits) == ["grout"]
    assert found.dated == ""


def test_the_user_is_told(store: MemoryStore) -> None:
    from ocat.headless.actions import format_hits

    _fill(store)
    found = search([store], "which grout did we choose for the tiles in april?", SETTINGS, now=NOW)
    note = "memories dated 2025-04-01..2025-04-30, from 'in april' ranked higher"
    assert found.dated == note
    assert format_hits(found.found).splitlines()[-1] == f"({note})"
    given = admitted(found.hits)
    title, _ = used_memories(given)
    assert title.endswith(f"({note})")
    # JSON: each hit of that time says so.
    from ocat.operations.search import hit_record

    assert hit_record(found.hits[0])["dated"] == note


def test_the_setting_turns_it_off(store: MemoryStore) -> None:
    _fill(store)
    off = load_settings(env={"OCAT_VECTOR_STORE_TIME_IN_PROMPT": "false"}).vector_store
    assert RetrievalLimits.from_settings(off).time_policy == "off"
    hits = retrieve(store, "which grout did we choose for the tiles in april?",
                    RetrievalLimits.from_settings(off), now=NOW)
    assert _ids(hits)[0] == "grout" and not any(h.dated for h in hits)


def test_last_february_asked_on_29_february_searches_the_february_before(store: MemoryStore) -> None:
    """Asked on 29 February 2028, "last February" is February 2027: the search (the CLI's and the
    chat's) once failed with "day is out of range for month"."""
    store.add_exchanges([
        Exchange(user_prompt=prompt, assistant_response=answer, thread_id=key, session_id=key, exchange_id=key,
                 timestamp=_at(day))
        for day, key, prompt, answer in (
            ("2027-02-10", "then", "which grout should we choose for the tiles?", "Warm white grout."),
            ("2028-02-10", "now", "which grout should we choose for the tiles?", "Light grey grout."),
        )
    ])
    leap_day = datetime(2028, 2, 29, 12, tzinfo=timezone.utc)
    found = search([store], "which grout did we choose for the tiles last february?", SETTINGS, now=leap_day)
    assert found.dated == "memories dated 2027-02-01..2027-02-28, from 'last february' ranked higher"
    assert _ids(found.hits)[0] == "then"
    hits = retrieve_any(store, ["what did we say last february", "the tiles\nwhat did we say last february"], CHAT,
                        now=leap_day)
    assert all(h.dated in ("", found.dated) for h in hits)
