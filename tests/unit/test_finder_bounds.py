"""The link finder's work on a long prompt is bounded: a pasted table or document is read once and
compared only by its first sentences with values (a chat's write waits for its links)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from ocat.memory.storage import version_finder, version_values
from ocat.memory.storage.version_finder import MAX_TEXT_READ, MAX_VALUES_READ, changed, evidence_of
from ocat.memory.storage.version_values import statements


def table(rows: int, start: int, tag: str) -> str:
    """A pasted table: every row a sentence with a value, all on one subject ("upfront")."""
    return " ".join(f"Row {tag}{n} pays {start + n % 50}% upfront today." for n in range(rows))


def test_a_long_text_is_split_into_sentences_once(monkeypatch: pytest.MonkeyPatch) -> None:
    splits = []

    class Counting:
        def split(self, text: str) -> list[str]:
            splits.append(text)
            return re.split(r"(?<=[.!?])\s+|\n+", text)

    monkeypatch.setattr(version_values, "_SENTENCE", Counting())
    text = table(300, 10, "split")
    found = statements(text)
    assert len(found) == 300 and found[-1].text == "Row split299 pays 59% upfront today."
    assert len(splits) == 1


def test_two_long_texts_are_compared_by_their_first_sentences_only(monkeypatch: pytest.MonkeyPatch) -> None:
    compared = []

    def never(*args: Any, **kwargs: Any) -> str:
        compared.append(args)
        return ""

    monkeypatch.setattr(version_finder, "_difference", never)
    assert changed(table(300, 10, "a"), table(300, 10, "b")) == ""
    # Every pair shares "upfront": unbounded, 90,000 comparisons.
    assert len(compared) == MAX_VALUES_READ * MAX_VALUES_READ


def test_a_change_past_what_is_read_is_not_found() -> None:
    older = "The roofer wants 30% upfront."
    filler = "Some words with no value at all here. " * (MAX_TEXT_READ // 38 + 1)
    assert evidence_of(older, "He now wants 40% upfront. " + filler, 1.0) == "30% -> 40%"
    assert evidence_of(older, filler + "He now wants 40% upfront.", 1.0) == ""
