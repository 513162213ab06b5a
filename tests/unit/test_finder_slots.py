"""A value said of the same word ("30% upfront", then "40% upfront") is a change of that fact, even
between exchanges only loosely alike (ocat.memory.storage.version_finder.slot_changed,
docs/memory.md, "Facts that change")."""

from __future__ import annotations

from typing import Any

import pytest

from ocat.memory.storage import version_finder
from ocat.memory.storage.version_finder import SLOT_SUBJECT, SUBJECT, changed, evidence_of, newer_ids, slot_changed
from ocat.memory.storage.version_values import slots
from ocat.records import UPDATE_EVIDENCE_KEY
from tests.unit.test_versions_finder import exchange, stored

TERMS = "He wants 30% upfront, 40% halfway, 30% on completion. What goes in the contract?"
SETTLED = "Settled with Rui Faria: €700 off, €15,100 total, 40% upfront. How do we split the rest?"


def test_a_value_is_read_with_the_word_it_is_said_of() -> None:
    read = {(s.word, s.value.said) for s in slots(TERMS)}
    assert ("upfront", "30%") in read and ("halfway", "40%") in read
    # With no word after it, the word before: "the rent €950".
    assert ("rent", "€950") in {(s.word, s.value.said) for s in slots("The rent €950 is due on the 1st.")}
    # "per", "CAD" after a value: a rate or a unit, too short to say what the value is of; the word before is taken.
    assert {s.word for s in slots("The paper $0.45 per sheet.")} == {"paper"}


def test_the_same_word_with_another_value_is_a_change_the_sentences_miss() -> None:
    # 40% was said before (of "halfway"), so the sentences' values show no new one.
    assert changed(TERMS, SETTLED) == ""
    assert slot_changed(TERMS, SETTLED) == "30% upfront -> 40% upfront"


def test_a_list_of_options_and_a_bare_number_are_no_change() -> None:
    # The older one already said 40% upfront: choosing one of two is no change of value.
    assert slot_changed("He offers 30% upfront or 40% upfront, our choice.", SETTLED) == ""
    # A bare number next to a word may be a count, a size, a fraction's part.
    assert slot_changed('The postcards need 1/8" bleed on each side.', 'The book needs 0.25" bleed, 400 dpi.') == ""


@pytest.mark.parametrize(("older", "newer"), [
    ("Gym membership is €30 monthly.", "Netflix is €15 monthly."),
    ("Electricity was €80 total last month.", "Water was €25 total last month."),
    ("I run 5 km daily.", "I swim 2 km daily."),
    ("The flight to Lisbon costs €120 each way.", "The train to Porto costs €35 each way."),
])
def test_a_word_that_says_a_values_period_or_sum_is_no_slot(older: str, newer: str) -> None:
    # Each pair is two things with one period or sum, not one fact that changed.
    assert slot_changed(older, newer) == ""


def test_a_slot_counts_from_its_own_likeness() -> None:
    assert SLOT_SUBJECT < SUBJECT
    assert evidence_of(TERMS, SETTLED, SLOT_SUBJECT) == "30% upfront -> 40% upfront"
    assert evidence_of(TERMS, SETTLED, SLOT_SUBJECT - 0.01) == ""


@pytest.mark.parametrize(("slot_subject", "linked"), [(0.0, True), (1.01, False)])
def test_a_write_links_a_value_of_the_same_word_between_loosely_alike_exchanges(
    store: Any, monkeypatch: pytest.MonkeyPatch, slot_subject: float, linked: bool
) -> None:
    # No exchange is close enough for the sentences' comparison: only the slot can link.
    monkeypatch.setattr(version_finder, "SUBJECT", 1.01)
    monkeypatch.setattr(version_finder, "SLOT_SUBJECT", slot_subject)
    terms = exchange(TERMS, 0, "s1")
    store.add_exchanges([terms, exchange(SETTLED, 90, "s2")])
    metadata = stored(store, terms.exchange_id)
    assert bool(newer_ids(metadata)) is linked
    if linked:
        assert metadata[UPDATE_EVIDENCE_KEY] == "30% upfront -> 40% upfront"
