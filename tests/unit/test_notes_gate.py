"""The gate on short notes (issue 49, part 4): the dev set is whole, its bench runs on a slice,
and with the real model a note is admitted for a question in its words while questions it
cannot answer stay quiet (docs/RETRIEVAL.md, "Notes and documents")."""

from __future__ import annotations

from typing import Any

import pytest

from bench.recall_notes import KINDS, Gate, ask, cross_validate, figures, load_notes, shipped_gate
from tests.support import MODEL_DIR

# The issue's note, and a site report whose one sentence names the bearings' maker.
TMD_NOTE = "The footbridge TMD supplier is Maurer; contact Jorge, +351 22 000 0000."
SITE_REPORT = (
    "Site report, week 12. The abutment walls on the north side were poured on Tuesday and the formwork comes off "
    "next week. The deck's steel girders arrived on schedule and were lifted into place with the mobile crane over "
    "two days. Bearings from Mageba were delivered to the yard and are stored under cover until the deck is jacked. "
    "The drainage contractor has started on the outfall. Rain stopped work on Thursday afternoon. Next week: strip "
    "formwork, survey the girder levels, start the parapet upstands."
)
OTHER_NOTES = (
    "Grandpa's blood type is O negative.", "The home printer takes HP 305XL cartridges.",
    "Meeting room Atlas seats 12 and has the only working projector.", "Bike lock combination: 0 6 2 9.",
    "Sofia's favourite flowers are ranunculus, not roses.", "Garage door code is 4471, changed in January.",
)
# The issue's three questions, each answered by one of them (the bearings by one sentence of the report).
ISSUES_QUESTIONS = {
    "who supplies the TMD": TMD_NOTE,
    "what is Jorge's phone number": TMD_NOTE,
    "who makes the bearings": SITE_REPORT,
}
# Near the notes' subjects, or nowhere near them: nothing stored answers these.
UNANSWERED = (
    "what is Pedro's phone number", "who supplies the bridge cables", "how do I bake sourdough",
    "what time is it in Tokyo", "who won the world cup in 2010", "explain recursion",
    "what is Jorge's email", "who makes the parapet railings", "when were the cables delivered",
    "how much did the bearings cost",
)


def test_the_dev_set_has_sixty_notes_each_with_a_direct_a_paraphrased_and_an_unrelated_question() -> None:
    notes = load_notes()

    assert len(notes) >= 60
    assert len({n["id"] for n in notes}) == len(notes) and len({n["text"] for n in notes}) == len(notes)
    for note in notes:
        assert all(note[kind].strip() for kind in ("direct", "paraphrased", "unrelated")), note["id"]
        assert set(note) <= {"id", "kind", "text", *KINDS}, note["id"]
    questions = [note[kind] for note in notes for kind in KINDS if kind in note]
    assert len(set(questions)) == len(questions)  # every question asked once


@pytest.mark.slow
def test_the_notes_bench_measures_a_slice() -> None:
    notes = load_notes()[:10]
    asked, ids = ask(notes, MODEL_DIR, 1.0)
    weight, gate = shipped_gate()

    assert weight == 1.0 and gate == Gate(0.74, 0.50)  # the exchanges' map, as docs/RETRIEVAL.md says
    row = figures(asked, ids, gate, reach=3)
    assert row["direct"] == 100.0 and row["unrelated"] == 100.0, row
    report = cross_validate({1.0: (asked, ids)}, 3, (weight, gate))
    assert len(report["folds"]) == 5 and report["fit_on_all"]["coverage_weight"] == 1.0


@pytest.mark.slow
def test_the_issues_three_questions_are_admitted_and_what_nothing_answers_stays_quiet(real_store: Any) -> None:
    from ocat.config.loading import load_settings
    from ocat.memory import RetrievalLimits, retrieve
    from ocat.operations.add import add_note

    settings = load_settings(env={})
    for text in (TMD_NOTE, SITE_REPORT, *OTHER_NOTES):
        add_note(real_store, text, settings.chunking, source="vadd_command")
    limits = RetrievalLimits.from_settings(settings.vector_store)

    for question, answer in ISSUES_QUESTIONS.items():
        [first, *_] = retrieve(real_store, question, limits)
        assert first.text == answer and first.admitted, (question, first.text[:40], first.score)
    for question in UNANSWERED:
        assert not any(hit.admitted for hit in retrieve(real_store, question, limits)), question



# -- answer types (ocat.memory.retrieval.answer_types) -------------------------------------------


@pytest.mark.parametrize(("question", "text", "answered"), [
    ("what is Jorge's phone number", TMD_NOTE, "phone number"),
    ("who supplies the TMD", TMD_NOTE, "supplies"),
    ("who makes the bearings", SITE_REPORT, "makes"),
    ("what's Kwame's mobile", "The plumber, Kwame Mensah; he's on 07700 900123.", "mobile"),
    ("what is Ana's email address", "Ana's new address is ana.r@example.org.", "email address"),
    ("when is the boiler service", "The boiler service is booked for 14 October.", ""),  # "when" is no term
    ("what day is the boiler service", "The boiler service is booked for 14 October.", "day"),
    ("how much does the tuner charge", "The piano tuner charges 90 euros.", "much charge"),
])
def test_a_note_holding_the_value_asked_for_answers_the_words_that_ask_for_it(
    question: str, text: str, answered: str
) -> None:
    from ocat.memory.retrieval.answer_types import answered_words, asked_types
    from ocat.memory.storage.terms import query_terms, terms

    assert answered_words(query_terms(question), text, asked_types(question)) == frozenset(terms(answered))


@pytest.mark.parametrize(("question", "text"), [
    ("what is Pedro's phone number", TMD_NOTE),  # another's number
    ("who supplies the bridge cables", TMD_NOTE),  # another thing's supplier
    ("what is the phone number", TMD_NOTE),  # nothing but the type: any number would do
    ("what is Jorge's phone number", "Jorge's locker code is 4471."),  # no phone number in it
    ("what is the garage door code", "Garage door code is 4471, changed in January."),  # asks no type
    ("who makes the bearings", "Bearings were delivered by March."),  # a month after "by" is no maker
    ("what's the policy number to call about", "Car insurance, policy DL-553-201."),  # a code is no phone number
])
def test_a_note_answers_nothing_by_type_unless_it_holds_the_value_and_every_other_word(question: str, text: str) -> None:
    from ocat.memory.retrieval.answer_types import answered_words, asked_types
    from ocat.memory.storage.terms import query_terms

    assert answered_words(query_terms(question), text, asked_types(question)) == frozenset()
