"""Answer types: a question that asks for a kind of value is answered by a note that holds one.

"what is Jorge's phone number" shares no word with "+351 22 000 0000", nor "who makes the
bearings" with "bearings from Mageba": the note's coverage of the question misses the words that
name what is asked, and a one-line note falls under the gate. When a question asks for a phone
number, an e-mail, a date, an amount, an address or who supplies something, a document whose
text holds such a value (a run of digits, an @, a month, a currency, "from <Name>") covers the
words that asked for it, as long as it holds every other word of the question: "Pedro's phone
number" is not answered by Jorge's, and "who supplies the bridge cables" not by the TMD's
supplier. Documents and notes only (exchanges keep their fitted map); measured by
`bench/recall_notes.py` (docs/RETRIEVAL.md, "Notes and documents").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ocat.memory.retrieval.neighbours import Candidate
from ocat.memory.storage.scoring import Calibration, coverage
from ocat.memory.storage.terms import term_set, terms
from ocat.records import searched_text

if TYPE_CHECKING:
    from ocat.memory.storage.store import MemoryStore

_MONTHS = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
    r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_DAYS = r"(?:(?:mon|tues|wednes|thurs|fri|satur|sun)days?)"


@dataclass(frozen=True)
class AnswerType:
    """One kind of value a question can ask for: how a question asks for it, the question's
    words that then name it, and how a text holds one."""

    name: str
    asked: re.Pattern[str]  # searched in the question, lower case
    words: frozenset[str]  # terms (ocat.memory.storage.terms) that name the value asked for
    held: re.Pattern[str]  # searched in a record's text, as written


def _type(name: str, asked: str, words: str, held: str, flags: int = re.IGNORECASE) -> AnswerType:
    return AnswerType(name, re.compile(asked), frozenset(terms(words)), re.compile(held, flags))


TYPES = (
    # Seven digits or more, in groups: "+351 22 000 0000", "07700 900123" (not a code, a year or a price).
    _type("phone", r"\b(?:phone|telephone|mobile|cell|call|ring|whatsapp)\b",
          "phone telephone mobile cell number call ring contact whatsapp",
          r"(?<![\w-])\+?(?:\d[ ().-]?){6,}\d(?![\w-])"),
    _type("email", r"\be-?mail\b", "email mail address contact", r"[\w.+-]+@[\w-]+\.\w"),
    # A name after from/by, or after a word that says who supplies ("supplier is Maurer"); never a month or a day.
    _type("supplier",
          r"\bwho\b|\bwhich (?:company|firm|supplier|manufacturer|brand|maker|vendor|contractor|shop)\b",
          "make makes made maker supply supplies supplied supplier provide provides provided provider sell sells "
          "sold seller vendor company firm brand manufacture manufactures manufactured manufacturer contractor "
          "deliver delivers delivered install installs installed fit fits fitted build builds built come comes "
          "source sources sourced produce produces produced",
          rf"\b(?:from|by)\s+(?:the\s+)?(?!(?i:{_MONTHS}|{_DAYS})\b)[A-Z][\w&.-]+|"
          rf"\b(?:supplier|manufacturer|maker|vendor|provider|contractor|brand)s?\b[^.;]{{0,30}}?\b(?:is|are|:)\s+[A-Z]",
          flags=0),
    _type("date", r"\bwhen\b|\b(?:what|which) (?:date|day|time|month|year|week)\b",
          "date day time month year week",
          rf"\b{_MONTHS}\b|\b{_DAYS}\b|\b\d{{1,2}}(?:st|nd|rd|th)\b|\b\d{{1,2}}[:.]\d{{2}}\b|\b\d{{1,2}}\s?[ap]m\b|"
          r"\b\d{4}-\d{2}-\d{2}\b|\bweek \d+\b"),
    _type("amount", r"\bhow much\b|\bcosts?\b|\bprice\b|\bcharges?\b|\bfees?\b|\bpay\b",
          "cost costs price charge charges fee fees pay much spend",
          r"[$€£]\s?\d|\b\d[\d,.]*\s?(?:euros?|pounds?|dollars?|eur|gbp|usd|quid|bucks)\b"),
    _type("address", r"\baddress\b|\bwhere does .+ live\b", "address live",
          r"\b\d+\s+[A-Z][a-z]+\s+(?:Street|St|Road|Rd|Avenue|Ave|Lane|Way|Square)\b|"
          r"\b[A-Z][a-z]+(?:gracht|straat|strasse|straße|gasse|weg)\s+\d+",
          flags=0),
)


def asked_types(question: str) -> tuple[AnswerType, ...]:
    """The kinds of value a question asks for (none for most questions)."""
    lowered = question.lower()
    return tuple(t for t in TYPES if t.asked.search(lowered))


def answered_words(question_terms: Sequence[str], text: str, asked: Sequence[AnswerType]) -> frozenset[str]:
    """The question's terms that `text` answers by holding a value of an asked type: none unless
    it holds every other term of the question (and there is at least one)."""
    held = [t for t in asked if t.held.search(text)]
    if not held:
        return frozenset()
    naming = frozenset().union(*(t.words for t in asked))
    rest = [t for t in question_terms if t not in naming]
    record = term_set(searched_text(text))
    if not rest or any(t not in record for t in rest):
        return frozenset()
    return frozenset(question_terms) & frozenset().union(*(t.words for t in held))


def typed_lift(
    ranked: Sequence[Candidate],
    records: Mapping[str, tuple[str, Mapping[str, Any]]],
    question_terms: Sequence[str],
    asked: Sequence[AnswerType],
    store: MemoryStore,
    judged: Calibration,
) -> list[Candidate]:
    """`ranked` (documents) with each that answers the question by type given the coverage of the
    words it answers (its fused score raised by what they add), ranked again."""
    doc_freqs = store.lexical.doc_freqs("document", question_terms)
    total = max(1, store.lexical.count("document"))
    lifted: list[Candidate] = []
    for c in ranked:
        text = records[c.id][0] if c.id in records else ""
        words = answered_words(question_terms, text, asked) if text else frozenset()
        if not words:
            lifted.append(c)
            continue
        own = term_set(searched_text(text))
        gain = coverage(question_terms, own | words, doc_freqs, total) - coverage(question_terms, own, doc_freqs, total)
        z = c.z + judged.coverage_weight * gain
        lifted.append(Candidate(c.id, judged.relevance_of(z), z, c.source) if gain > 0 else c)
    return sorted(lifted, key=lambda c: c.rank, reverse=True)
