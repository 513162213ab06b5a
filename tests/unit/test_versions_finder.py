"""Facts that change: the values a text states, the links found when exchanges are written, and
retrieval that follows them forward (and, asked about the past, back) (docs/memory.md, "Facts that
change")."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ocat.memory.retrieval.neighbours import Candidate
from ocat.memory.retrieval.given import within_budget
from ocat.memory.storage.version_finder import Link, changed, newer_ids, record_links
from ocat.memory.retrieval.follow_versions import (
    VERSION_EASE, asks_about_now, asks_about_the_past, asks_for_the_first, gate_of, lift_newer, with_earlier,
    with_newest,
)
from ocat.memory.storage.version_values import Value, statements
from ocat.operations.versions import updated_by
from ocat.records import SUPERSEDED_KEY, UPDATE_EVIDENCE_KEY, UPDATE_HOW_KEY, Exchange, SearchHit
from tests.support.examples import examples
from tests.support.fakes import SameCalibration
from tests.support.paths import REPO

DAY = 86_400.0


def values_of(text: str) -> set[tuple[str, str]]:
    return {(v.kind, v.text) for s in statements(text) for v in s.values}


def test_a_value_is_typed_and_said_the_same_however_it_is_written() -> None:
    assert Value("date", "04-14") in {v for s in statements("We start on 14 April.") for v in s.values}
    assert values_of("We start on April 14th.") == values_of("We start on 14 April.")
    assert ("mg", "850") in values_of("Metformin is 850 mg twice daily now.")
    assert ("money", "15800") in values_of("The quote is €15,800 all in.")
    assert ("time", "07:05") in values_of("The flight leaves at 7:05 from Lisbon.")
    # A year before a name is no quantity of that name.
    assert not any(kind == "volvo" for kind, _ in values_of("We sell our 2011 Volvo."))


def test_the_same_subject_with_a_different_value_is_a_change() -> None:
    evidence = changed("My doctor put me on metformin 500 mg twice daily.",
                       "The doctor raised my metformin to 850 mg twice daily.")
    assert evidence == "500 mg -> 850 mg"
    assert changed("The roofer starts on 3 March.", "Rain again: the roofer now starts on 28 April.") \
        == "3 March -> 28 April"


def test_saying_the_same_value_again_is_no_change() -> None:
    assert changed("The doctor raised my metformin to 850 mg twice daily.",
                   "Packing for Utrecht: metformin 850 mg twice daily, enough for two weeks.") == ""


def test_near_duplicates_of_different_subjects_are_no_change() -> None:
    # "200 g" of flour and "170 g" of dog food share a unit and no subject.
    assert changed("Broa: 400 g corn flour and 200 g wheat flour, baked at 230 °C.",
                   "Tejo the dog now gets 170 g of food a day.") == ""
    assert changed("Physio is on Tuesdays at 9:30.", "The Repair Café meets on Saturdays at 10:00.") == ""


def test_a_name_counts_as_a_new_value_only_when_asked_to() -> None:
    # A name said differently is evidence only between exchanges close enough in meaning
    # (version_finder.NAME_SUBJECT): loosely alike ones name other people and things.
    older, newer = "The roofer is Telhados Mira; they start in May.", "The roofer is Rui Faria; they start in May."
    assert changed(older, newer) == "Telhados Mira -> Rui Faria"
    assert changed(older, newer, names=False) == ""
    assert changed("The roof costs €14,200 with Telhados Mira.", "The roof costs €15,100 with Rui Faria.",
                   names=False) == "€14,200 -> €15,100"


@pytest.mark.parametrize(("name_subject", "linked"), [(0.0, True), (1.01, False)])
def test_a_write_links_by_a_name_only_when_close_enough_in_meaning(
    store: Any, monkeypatch: pytest.MonkeyPatch, name_subject: float, linked: bool
) -> None:
    from ocat.memory.storage import version_finder

    monkeypatch.setattr(version_finder, "SUBJECT", 0.0)
    monkeypatch.setattr(version_finder, "NAME_SUBJECT", name_subject)
    first = exchange("The roofer is Telhados Mira; they start in May.", 0, "s1")
    store.add_exchanges([first, exchange("The roofer is Rui Faria; they start in May.", 30, "s2")])
    assert bool(newer_ids(stored(store, first.exchange_id))) is linked


def exchange(prompt: str, day: float, session: str, thread: str = "t") -> Exchange:
    return Exchange(user_prompt=prompt, assistant_response="Noted.", thread_id=thread, session_id=session,
                    timestamp=1_735_700_000.0 + day * DAY)


def stored(store: Any, exchange_id: str) -> dict[str, Any]:
    got = store.fetch("exchange", [exchange_id], vectors=False)
    return dict(got["metadatas"][0] or {})


@pytest.mark.slow
def test_a_write_links_the_earlier_version_it_updates_with_the_real_model(real_store: Any) -> None:
    """Same subject and another value: linked both ways, with the evidence. A restatement of the
    newest value, another subject, and a change said in the same session link nothing."""
    first = exchange("My doctor put me on metformin 500 mg twice daily for the diabetes.", 0, "s1")
    same_session = exchange("Actually she said metformin 1000 mg twice daily from next week.", 0.01, "s1")
    dog = exchange("Tejo the dog eats 200 g of kibble a day; the vet is happy with him.", 1, "s2")
    raised = exchange("The doctor raised my metformin to 850 mg twice daily for the diabetes.", 30, "s3")
    again = exchange("Packing list: metformin 850 mg twice daily, enough for the whole trip.", 40, "s4")
    real_store.add_exchanges([first, same_session, dog])
    real_store.add_exchanges([raised])
    real_store.add_exchanges([again])
    older = stored(real_store, first.exchange_id)
    assert raised.exchange_id in newer_ids(older)
    assert older[UPDATE_EVIDENCE_KEY].endswith("-> 850 mg") and older[UPDATE_HOW_KEY] == "found"
    assert newer_ids(stored(real_store, raised.exchange_id)) == []  # "again" restates it
    assert newer_ids(stored(real_store, dog.exchange_id)) == []
    assert same_session.exchange_id not in newer_ids(older)


def test_a_write_without_linking_links_nothing(store: Any) -> None:
    store.link_versions = False
    first = exchange("metformin 500 mg twice daily", 0, "s1")
    store.add_exchanges([first, exchange("metformin 850 mg twice daily", 30, "s2")])
    assert newer_ids(stored(store, first.exchange_id)) == []


def hit(record: Exchange, score: float, threshold: float = 0.65, **changes: Any) -> SearchHit:
    return SearchHit(id=record.exchange_id, kind="exchange", score=score, text=record.text,
                     metadata=record.to_metadata(), threshold=threshold, rank=score, **changes)


def stored_hit(store: Any, record: Exchange, score: float) -> SearchHit:
    """A hit as retrieval makes it: with the metadata the store holds (its links)."""
    return replace_metadata(hit(record, score), stored(store, record.exchange_id))


def chain(store: Any, *prompts: str) -> list[Exchange]:
    """Exchanges written a month apart, each linked to the next."""
    records = [exchange(p, 30 * n, f"s{n}") for n, p in enumerate(prompts)]
    store.link_versions = False
    store.add_exchanges(records)
    record_links(store, [Link(a.exchange_id, b.exchange_id, "x → y") for a, b in zip(records, records[1:])])
    return records


def test_an_admitted_old_version_brings_its_newest_and_the_one_before(store: Any) -> None:
    old, middle, newest = chain(store, "dose 500 mg", "dose 850 mg", "dose 1000 mg")
    found = with_newest(store, [stored_hit(store, old, 0.8)])
    assert [h.id for h in found] == [old.exchange_id, newest.exchange_id, middle.exchange_id]
    assert all(h.admitted for h in found)
    assert {h.newest_of for h in found[1:]} == {old.exchange_id}
    # A newer version under the gate in the same list is given as the newest, not listed twice.
    found = with_newest(store, [stored_hit(store, old, 0.8), stored_hit(store, newest, 0.3)])
    assert [h.id for h in found].count(newest.exchange_id) == 1
    assert next(h for h in found if h.id == newest.exchange_id).admitted


def test_a_newer_version_listed_past_the_chats_count_is_given_as_the_chat_gives_it(store: Any) -> None:
    # `--results 10` lists hits the chat never reads; the newest version an admitted hit brings
    # must be the chat's own, not the listed hit with its own score (found on chats-dev: 0.224
    # listed against 0.625 in the chat).
    old, newest = chain(store, "dose 500 mg", "dose 850 mg")
    chats = with_newest(store, [stored_hit(store, old, 0.8)])
    listed = with_newest(store, [stored_hit(store, old, 0.8), replace(stored_hit(store, newest, 0.3), beyond=True)])

    def seen(hits: list[SearchHit]) -> list[tuple[Any, ...]]:
        return [(h.id, h.score, h.admitted, h.newest_of, h.beyond) for h in hits]

    assert seen(listed) == seen(chats)


def test_a_version_listed_as_another_hits_thread_context_is_given_for_its_bringers_sake(store: Any) -> None:
    # Listed as the context of a hit that did not pass, the newest version was skipped by the
    # budget (context comes only with its memory), and the old one then went with it.
    old, newest = chain(store, "dose 500 mg", "dose 850 mg")
    context = replace(stored_hit(store, newest, 0.3), context_of="another-hit", with_admitted=False)
    found = with_newest(store, [stored_hit(store, old, 0.8), context])
    assert (found[1].id, found[1].newest_of, found[1].context_of) == (newest.exchange_id, old.exchange_id, None)
    assert [h.id for h in within_budget(found, 10_000)] == [old.exchange_id, newest.exchange_id]


def test_an_old_version_under_the_gate_brings_nothing(store: Any) -> None:
    old, _ = chain(store, "dose 500 mg", "dose 850 mg")
    assert [h.id for h in with_newest(store, [stored_hit(store, old, 0.3)])] == [old.exchange_id]


def test_an_old_version_whose_newest_does_not_fit_the_budget_is_not_given_alone(store: Any) -> None:
    old, newest = chain(store, "dose 500 mg", "dose 850 mg " + "word " * 400)
    found = with_newest(store, [stored_hit(store, old, 0.8)])
    assert [h.id for h in within_budget(found, 10_000)] == [old.exchange_id, newest.exchange_id]
    assert within_budget(found, 50) == []


def test_asked_about_the_past_the_newest_version_takes_only_the_room_left(store: Any) -> None:
    # The old version is what a question about the past asks for: its newest version (often of
    # another fact the same exchange told) comes after every memory found on its own, and the old
    # one goes without it when the budget is spent (changing-own2's history questions lost their
    # answers to it).
    old, newest = chain(store, "dose 500 mg", "dose 850 mg " + "word " * 400)
    other = exchange("the clinic asked about the first dose", 90, "s9")
    store.add_exchanges([other])
    hits = [stored_hit(store, old, 0.8), stored_hit(store, other, 0.7)]
    now = with_newest(store, hits)
    assert [h.id for h in now] == [old.exchange_id, newest.exchange_id, other.exchange_id]
    assert [h.id for h in within_budget(now, 200)] == [other.exchange_id]
    past = sorted(with_newest(store, hits, past=True), key=lambda h: h.order, reverse=True)
    assert [h.id for h in past] == [old.exchange_id, other.exchange_id, newest.exchange_id]
    assert [h.after_found for h in past] == [False, False, True] and past[2].newest_of == old.exchange_id
    assert [h.id for h in within_budget(past, 200)] == [old.exchange_id, other.exchange_id]
    assert [h.id for h in within_budget(past, 10_000)] == [old.exchange_id, other.exchange_id, newest.exchange_id]


def test_asked_about_the_past_a_newer_version_brings_the_first_or_the_one_before(store: Any) -> None:
    old, middle, newest = chain(store, "dose 500 mg", "dose 850 mg", "dose 1000 mg")
    first = with_earlier(store, [stored_hit(store, newest, 0.8)], first=True)
    assert [h.id for h in first] == [newest.exchange_id, old.exchange_id]
    assert first[1].earlier_of == newest.exchange_id and first[1].admitted
    before = with_earlier(store, [stored_hit(store, newest, 0.8)], first=False)
    assert [h.id for h in before] == [newest.exchange_id, middle.exchange_id]
    # One listed under the gate moves next to the newer version and is given, once.
    listed = with_earlier(store, [stored_hit(store, newest, 0.8), stored_hit(store, old, 0.2)], first=True)
    assert [(h.id, h.admitted) for h in listed] == [(newest.exchange_id, True), (old.exchange_id, True)]
    # One already given on its own is not brought again; a version nothing updates brings nothing.
    given = [stored_hit(store, old, 0.9), stored_hit(store, newest, 0.8)]
    assert with_earlier(store, given, first=True) == given
    assert with_earlier(store, [stored_hit(store, old, 0.8)], first=True) == [stored_hit(store, old, 0.8)]
    # Nor does one under the gate.
    assert [h.id for h in with_earlier(store, [stored_hit(store, newest, 0.3)], first=True)] == [newest.exchange_id]


def test_an_earlier_version_listed_past_the_chats_count_is_given_as_the_chat_gives_it(store: Any) -> None:
    old, newest = chain(store, "dose 500 mg", "dose 850 mg")
    chats = with_earlier(store, [stored_hit(store, newest, 0.8)], first=True)
    listed = with_earlier(store, [stored_hit(store, newest, 0.8), replace(stored_hit(store, old, 0.3), beyond=True)],
                          first=True)
    assert [(h.id, h.score, h.admitted, h.earlier_of, h.beyond) for h in listed] == \
        [(h.id, h.score, h.admitted, h.earlier_of, h.beyond) for h in chats]


def test_an_earlier_version_whose_newer_one_does_not_fit_the_budget_is_not_given_alone(store: Any) -> None:
    old, newest = chain(store, "dose 500 mg", "dose 850 mg " + "word " * 400)
    found = with_earlier(store, [stored_hit(store, newest, 0.8)], first=True)
    assert [h.id for h in within_budget(found, 10_000)] == [newest.exchange_id, old.exchange_id]
    assert within_budget(found, 50) == []


def test_a_search_about_the_past_gets_the_first_version_and_one_about_now_does_not(store: Any) -> None:
    from ocat.memory import RetrievalLimits, retrieve

    old = exchange("Shed padlock combination: 1234, written on the calendar.", 0, "s1", thread="t1")
    new = exchange("The bike lock code changed to 4821 after the garage break-in.", 30, "s2", thread="t2")
    store.link_versions = False
    store.add_exchanges([old, new])
    record_links(store, [Link(old.exchange_id, new.exchange_id, "1234 -> 4821")])
    limits = RetrievalLimits(exchange_results=5, document_results=0, exchange_threshold=0.5, document_threshold=1.0)

    def given(question: str) -> dict[str, SearchHit]:
        return {h.id: h for h in retrieve(store, question, limits) if h.admitted}

    now = given("what is the bike lock code after the garage break-in now?")
    assert list(now) == [new.exchange_id]
    past = given("what was the bike lock code originally, before the garage break-in?")
    assert list(past) == [new.exchange_id, old.exchange_id]
    assert past[old.exchange_id].earlier_of == new.exchange_id


@pytest.mark.parametrize(("question", "first"), [
    ("what did the very first roof quote come to?", True),
    ("when were we originally supposed to come back?", True),
    ("what was the dose before it went up?", False),
])
def test_a_question_about_the_past_is_told_asking_for_the_first_or_the_one_before(question: str, first: bool) -> None:
    assert asks_about_the_past(question) and asks_for_the_first(question) is first


def test_the_newer_of_two_versions_found_together_is_lifted() -> None:
    judged = _identity_calibration()
    old = exchange("dose 500 mg", 0, "s1")
    new = exchange("dose 850 mg", 30, "s2")
    records = {
        old.exchange_id: ("", old.to_metadata() | {"updated_by": new.exchange_id}),
        new.exchange_id: ("", new.to_metadata()),
    }
    ranked = [Candidate(old.exchange_id, 0.9, 0.9), Candidate(new.exchange_id, 0.5, 0.5)]
    now = lift_newer(ranked, records, judged, lift=0.1)
    assert [c.id for c in now] == [new.exchange_id, old.exchange_id]
    assert now[0].z == pytest.approx(1.0)
    assert lift_newer(ranked, records, judged, lift=0.0) == ranked
    # An older version ranked below its newer one is left where it is.
    assert lift_newer(list(reversed(ranked)), records, judged, lift=0.1)[0].id == new.exchange_id


def test_asked_about_the_past_a_version_a_newer_one_updates_stands_a_little_under_the_gate() -> None:
    from ocat.memory.retrieval.verdicts import verdicts as judged

    old, new, plain, note = (exchange(p, 30 * n, f"s{n}") for n, p in enumerate(
        ("dose 500 mg", "dose 850 mg", "the dog eats 200 g", "call the vet")))
    records = {
        old.exchange_id: ("", old.to_metadata() | {"updated_by": new.exchange_id}),
        plain.exchange_id: ("", plain.to_metadata()),
        note.exchange_id: ("", note.to_metadata() | {"updated_by": new.exchange_id, SUPERSEDED_KEY: new.exchange_id}),
    }
    under = 0.65 - VERSION_EASE / 2  # under the gate, within the ease
    kept = [Candidate(i, under, under) for i in (old.exchange_id, plain.exchange_id, note.exchange_id)]

    def verdicts(kept: list[Candidate], *, eased: bool) -> dict[str, SearchHit]:
        found = judged(kept, records, "exchange", 0.65, _identity_calibration(), reach=5, eased=eased)
        return {h.id: h for h in found}

    assert VERSION_EASE > 0
    hits = verdicts(kept, eased=True)
    assert hits[old.exchange_id].admitted and hits[old.exchange_id].threshold == pytest.approx(0.65 - VERSION_EASE)
    assert not hits[plain.exchange_id].admitted and hits[plain.exchange_id].threshold == 0.65
    assert not hits[note.exchange_id].admitted  # a replaced note never stands, eased or not
    # A question not about the past keeps the gate for every memory.
    assert not any(h.admitted for h in verdicts(kept, eased=False).values())
    # Further under, past the ease, the old version is not given either.
    low = 0.65 - VERSION_EASE - 0.01
    assert not verdicts([Candidate(old.exchange_id, low, low)], eased=True)[old.exchange_id].admitted
    assert gate_of(records[plain.exchange_id][1], 0.7) == 0.7


def test_a_thread_neighbour_shown_as_context_does_not_bring_its_newer_versions(store: Any) -> None:
    # The user asked about the boat exam; the exchange after it in its thread told the
    # grandchildren's dates, which a later exchange changed.
    exam = exchange("the exam is on Saturday 24 May", 0, "s0")
    dates, later = chain(store, "the grandchildren come 12 to 26 July", "they now come 12 to 22 July")
    shown_for_exam = replace(stored_hit(store, dates, 0.03), context_of=exam.exchange_id, with_admitted=True)
    found = with_newest(store, [hit(exam, 0.8), shown_for_exam])
    assert [h.id for h in found] == [exam.exchange_id, dates.exchange_id]
    assert all(h.admitted for h in found)
    assert updated_by(found[1])  # the memory block still marks it updated
    # Given for itself, the same version brings its newest.
    found = with_newest(store, [stored_hit(store, dates, 0.8)])
    assert [(h.id, h.newest_of) for h in found] == [(dates.exchange_id, None), (later.exchange_id, dates.exchange_id)]


@pytest.mark.parametrize(("question", "past"), [
    ("who was the first roofer we got a quote from, before we switched?", True),
    ("when were we originally supposed to come back?", True),
    ("what dose of metformin am I on now?", False),
    ("how much does Tejo eat?", False),
])
def test_a_question_about_the_past_is_told_from_others(question: str, past: bool) -> None:
    assert asks_about_the_past(question) is past


def _identity_calibration() -> Any:
    return SameCalibration()


@pytest.mark.parametrize(("question", "now"), [
    ("what dose of metformin am I on now?", True),
    ("where was the party held in the end?", True),
    ("which dates are we away in september again?", True),
    ("what did the very first roof quote come to?", False),
    ("how much does Tejo eat?", False),
])
def test_a_question_about_now_is_told_from_others(question: str, now: bool) -> None:
    assert asks_about_now(question) is now


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(links=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=8),
       scores=st.lists(st.floats(0.0, 1.0), min_size=6, max_size=6), first=st.booleans(), past=st.booleans())
def test_following_links_never_drops_a_memory_that_passed_the_gate(
    tmp_path_factory: pytest.TempPathFactory, links: list[tuple[int, int]], scores: list[float], first: bool,
    past: bool,
) -> None:
    from ocat.memory import MemoryStore, StoreLocation
    from tests.support.fakes import FakeEmbedder

    store = MemoryStore.open(StoreLocation(path=tmp_path_factory.mktemp("s") / "s"), FakeEmbedder(), name="p")
    try:
        store.link_versions = False
        records = [exchange(f"fact {n} value {n}", n, f"s{n}") for n in range(6)]
        store.add_exchanges(records)
        # Any links, circles included (a user's /supersede may make one): never loops, never drops.
        record_links(store, [Link(records[a].exchange_id, records[b].exchange_id, "e") for a, b in links if a != b])
        hits = [hit(r, s) for r, s in zip(records, scores)]
        hits = [replace_metadata(h, stored(store, h.id)) for h in hits]
        before = {h.id for h in hits if h.admitted}
        after = with_newest(store, hits, past=past)
        assert before <= {h.id for h in after if h.admitted}
        assert len({h.id for h in after}) == len(after)
        # Asked about the past, what the budget gives first is never a version brought along.
        given = within_budget(sorted((h for h in after if h.admitted), key=lambda h: h.order, reverse=True), 10_000)
        brought = [n for n, h in enumerate(given) if h.after_found]
        assert not past or all(n >= len(given) - len(brought) for n in brought)
        # Asked about the past, following them back as well drops nothing either.
        back = with_earlier(store, after, first=first)
        assert before <= {h.id for h in back if h.admitted}
        assert len({h.id for h in back}) == len(back)
    finally:
        store.close()


def replace_metadata(found: SearchHit, metadata: dict[str, Any]) -> SearchHit:
    from dataclasses import replace

    return replace(found, metadata=metadata)


def test_the_bench_reads_the_sets_links(tmp_path: Path) -> None:
    """bench/recall_changing.py's gold links come from the set's README table (skipped without it)."""
    import sys

    folder = REPO.parent / "shared" / "eval" / "changing-dev"
    if not folder.exists():
        pytest.skip("../shared/eval/changing-dev is not here")
    sys.path.insert(0, str(REPO / "bench"))
    from recall_changing import gold_links

    assert len(gold_links(folder)) >= 40


@pytest.mark.slow
def test_a_note_that_says_a_new_value_links_the_earlier_note_with_the_real_model(real_store: Any) -> None:
    from ocat.config.loading import load_settings
    from ocat.operations.add import add_note

    chunking = load_settings(env={}).chunking
    old = add_note(real_store, "The gate code for the allotment is 4821.", chunking, source="vadd_command").ids[0]
    other = add_note(real_store, "The bike lock code is 1999.", chunking, source="vadd_command").ids[0]
    new = add_note(real_store, "New gate code for the allotment: 7730.", chunking, source="vadd_command").ids[0]
    older = stored_document(real_store, old)
    assert older.get("updated_by") == stored_document(real_store, new)["document_id"]
    assert older[UPDATE_EVIDENCE_KEY] == "4821 -> 7730" and older[UPDATE_HOW_KEY] == "found"
    assert not stored_document(real_store, other).get("updated_by")


def stored_document(store: Any, chunk_id: str) -> dict[str, Any]:
    got = store.fetch("document", [chunk_id], vectors=False)
    return dict(got["metadatas"][0] or {})


@pytest.mark.slow
def test_the_memory_block_names_a_notes_newer_version_by_the_id_it_gives_that_version(real_store: Any) -> None:
    """A note's document id is long: `updated-by` must be the id the newer note's own element has."""
    import re

    from ocat.chat.messages import memory_message
    from ocat.config.loading import load_settings
    from ocat.memory import RetrievalLimits, admitted, retrieve
    from ocat.operations.add import add_note

    settings = load_settings(env={})
    add_note(real_store, "The gate code for the allotment is 4821.", settings.chunking, source="vadd_command")
    add_note(real_store, "New gate code for the allotment since Monday: 7730.", settings.chunking, source="vadd_command")
    hits = admitted(retrieve(real_store, "what is the gate code for the allotment?",
                             RetrievalLimits.from_settings(settings.vector_store)))
    message = memory_message(hits)
    assert message is not None
    newer = re.search(r'<memory id="([^"]+)"[^>]*>\nNew gate code', message["content"])
    assert newer is not None and f'updated-by="{newer.group(1)}"' in message["content"]


def test_an_admitted_old_note_brings_its_newer_note_named_by_its_document_key(store: Any) -> None:
    """A note's link names the newer note's document id, not a chunk id: following reads it as its first chunk."""
    from ocat.config.loading import load_settings
    from ocat.operations.add import add_note
    from ocat.operations.versions import shown_record

    chunking = load_settings(env={}).chunking
    store.link_versions = False
    old = add_note(store, "The gate code is 4821.", chunking, source="vadd_command").ids[0]
    new = add_note(store, "The new gate code is 7730.", chunking, source="vadd_command").ids[0]
    memory_link(store, old, new)
    got = store.fetch("document", [old], vectors=False)
    note = SearchHit(id=old, kind="document", score=0.9, text=got["documents"][0], metadata=dict(got["metadatas"][0]),
                     threshold=0.7, rank=0.9)
    found = with_newest(store, [note])
    assert [h.id for h in found] == [old, new] and found[1].newest_of == old and found[1].admitted
    assert shown_record("document", str(got["metadatas"][0]["updated_by"])) == new
    # Asked about the past, the newer note leads back to the older one, read as its first chunk.
    newer = store.fetch("document", [new], vectors=False)
    latest = SearchHit(id=new, kind="document", score=0.9, text=newer["documents"][0],
                       metadata=dict(newer["metadatas"][0]), threshold=0.7, rank=0.9)
    back = with_earlier(store, [latest], first=True)
    assert [h.id for h in back] == [new, old] and back[1].earlier_of == new and back[1].admitted


def memory_link(store: Any, older: str, newer: str) -> None:
    from ocat import memory

    memory.link(store, older, newer, "user", "4821 -> 7730")
