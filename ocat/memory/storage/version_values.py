"""The values a text states, typed, each with the words of its sentence: what a fact's change is made of.

A fact that changes keeps its subject and changes a value: a dose (850 mg), a price (EUR 15,800),
a date (14 April), a time (11:55), a weekday, a count (22 guests), a name (Rui Faria). The link
finder (ocat.memory.storage.version_finder) compares two memories' values sentence by sentence: a
sentence of the newer one and a sentence of the older that share a subject word and hold
different values of the same type are the evidence of a "may update". Pure text: no model.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass, field, replace
from functools import lru_cache

from ocat.memory.storage.terms import STOP_WORDS, stem

MONTHS = {
    name: number
    for number, names in enumerate(
        (("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
         ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"),
         ("november", "nov"), ("december", "dec")), start=1)
    for name in names
}
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTH = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?"
          r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)")
_NUMBER = r"\d+(?:[.,]\d+)*"
# Order matters: the first pattern to claim a stretch of text types it.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("date", re.compile(r"\b\d{4}-\d{2}-\d{2}\b")),
    ("date", re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?(?:\s*[-–]\s*\d{{1,2}})?\s+(?:of\s+)?({_MONTH})\b", re.I)),
    ("date", re.compile(rf"\b({_MONTH})\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?!:)", re.I)),
    ("date", re.compile(r"\bthe\s+(\d{1,2})(?:st|nd|rd|th)\b", re.I)),
    ("time", re.compile(r"\b([01]?\d|2[0-3])[:h]([0-5]\d)\b")),
    ("money", re.compile(rf"[€$£]\s?{_NUMBER}|\b{_NUMBER}\s?(?:€|eur\b|euros?\b|usd\b|dollars?\b|£)", re.I)),
    ("weekday", re.compile(r"\b(monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?\b", re.I)),
    ("quantity", re.compile(rf"\b({_NUMBER})\s?(%|°\s?c\b|[a-zA-Z]{{1,12}}\b)")),
    ("number", re.compile(rf"\b{_NUMBER}\b")),
)
# A run of capitalised words that does not start a sentence: a name (a person, a firm, a place).
# (After a colon a sentence starts: "Caroline: Hey Mel!" names no "Hey Mel".)
_NAME = re.compile(r"(?<=[\w,;)] )([A-Z][\w'’-]+(?: (?:de |da |do |van |von )?[A-Z][\w'’-]+)*)")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[^\W\d_]+")
# Words after a number that say what is counted but are no unit: "3 of them", "2 and".
_NOT_UNITS = STOP_WORDS | {"x", "times", "more", "less", "or", "to"}


@dataclass(frozen=True)
class Value:
    """One value a sentence states: its type (date, time, money, weekday, a unit such as "mg",
    number, name) and its normalised form, so "14 April" and "April 14th" are equal."""

    kind: str
    text: str
    # As written ("14 April"), for the evidence a link shows; not part of what makes two equal.
    said: str = field(default="", compare=False)


@dataclass(frozen=True)
class Statement:
    """A sentence's values and its subject words (stemmed content words, values left out)."""

    values: frozenset[Value]
    words: frozenset[str]
    text: str


def statements(text: str) -> tuple[Statement, ...]:
    """The sentences of `text` that state at least one value, in order."""
    return _statements(text)


@lru_cache(maxsize=4096)
def _statements(text: str) -> tuple[Statement, ...]:
    sentences = _typed_sentences(text)
    read = [_values(spans, rest) for _, spans, rest in sentences]
    words = [_words(rest) | names for _, rest, names in read]
    found = []
    for n, (values, _, _) in enumerate(read):
        if values:
            # The subject is often named a sentence before or after: "Sold the Volvo! EUR 3,650
            # to a man from Sines." Both neighbours lend their words, and a name is a subject too.
            around = frozenset().union(*words[max(0, n - 1) : n + 2])
            found.append(Statement(frozenset(values), around, sentences[n][0].strip()))
    return tuple(found)


_Span = tuple[int, int, Value]


@lru_cache(maxsize=4096)
def _typed_sentences(text: str) -> tuple[tuple[str, tuple[_Span, ...], str], ...]:
    """Each sentence of `text` with its typed values' spans and itself with them blanked out
    (`_typed_spans`): split once (splitting again per statement made a long text quadratic) and
    read once for both `statements` and `slots`."""
    return tuple((sentence, *_typed_spans(sentence)) for sentence in _SENTENCE.split(text))


def _words(text: str) -> frozenset[str]:
    """A sentence's subject words: stemmed content words, dates and weekdays left out."""
    return frozenset(stem(w) for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in STOP_WORDS
                     and w not in MONTHS and w.rstrip("s") not in WEEKDAYS)


def _values(spans: tuple[_Span, ...], rest: str) -> tuple[set[Value], str, frozenset[str]]:
    """The values of one sentence (its typed ones, `spans`, and the names in `rest`, the sentence
    with those blanked out), `rest` with the names blanked out too, and its names' words."""
    values = {value for _, _, value in spans}
    names: set[str] = set()
    for match in _NAME.finditer(rest):
        name = re.sub(r"['’]s$", "", match.group(1))
        if len(name) > 2 and not name.isupper() and name.lower() not in MONTHS and name.lower() not in STOP_WORDS \
                and name.lower().rstrip("s") not in WEEKDAYS and name not in {"I'm", "I've"}:
            values.add(Value("name", name.lower(), name))
            names.update(_words(name))
    return values, _NAME.sub(lambda m: " " * len(m.group(0)), rest), frozenset(names)


def _typed_spans(sentence: str) -> tuple[tuple[_Span, ...], str]:
    """Where in a sentence each typed value stands (start, end, value), and the sentence with
    them blanked out (names are not typed here)."""
    spans: list[_Span] = []
    rest = sentence
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(rest):
            value = _typed(kind, match)
            if value is not None:
                spans.append((match.start(), match.end(), replace(value, said=match.group(0).strip())))
        rest = _blank(pattern, rest, kind)
    return tuple(spans), rest


@dataclass(frozen=True)
class Slot:
    """A value with the word it is said of, right after it ("30% upfront") or, when none
    follows, right before it ("total 40%"): `word` stemmed."""

    word: str
    value: Value
    # The word as written ("totals"), for the evidence a link shows.
    written: str = field(default="", compare=False)


# How far (characters) a slot's word may stand from its value: a space, a comma, a dash.
_SLOT_GAP = 3
# A slot's word is a content word of this many letters or more: "per", "CAD" and "BLE" after a
# number say a unit or a rate, not what the value is of.
_SLOT_WORD = 4
# Words that say a value's period, sum or kind ("€30 monthly", "€80 total", "5 km daily", "costs
# €120") and not what it is of: the gym and Netflix, the electricity and the water, the flight
# and the train would each be one fact by them.
_NOT_SLOT_WORDS = frozenset(
    """hourly daily nightly weekly monthly yearly annually total totals each every apiece overall cost costs
    costing price priced prices pay pays paid charge charges charged today tonight tomorrow yesterday extra
    approx approximately roughly about around""".split()
)


def slots(text: str) -> tuple[Slot, ...]:
    """Each typed value of `text` with the word it is said of (see Slot); a value with no such
    word has no slot."""
    return _slots(text)


@lru_cache(maxsize=4096)
def _slots(text: str) -> tuple[Slot, ...]:
    found: list[Slot] = []
    for _, spans, rest in _typed_sentences(text):
        words = [(m.start(), m.end(), m.group(0).lower()) for m in _WORD.finditer(rest)]
        starts = [start for start, _, _ in words]
        for start, end, value in spans:
            # The first word starting at or after the value's end, and the one before it.
            at = bisect_left(starts, end)
            after = words[at][2] if at < len(words) and words[at][0] - end <= _SLOT_GAP else ""
            ahead = at - 1  # no word overlaps a value (values are blanked out of `rest`)
            before = words[ahead][2] if ahead >= 0 and 0 <= start - words[ahead][1] <= _SLOT_GAP else ""
            word = after if _slot_word(after) else before
            if _slot_word(word):
                found.append(Slot(stem(word), value, word))
    return tuple(found)


def _slot_word(word: str) -> bool:
    return len(word) >= _SLOT_WORD and word not in STOP_WORDS and word not in _NOT_SLOT_WORDS \
        and word not in MONTHS and word.rstrip("s") not in WEEKDAYS


def _blank(pattern: re.Pattern[str], text: str, kind: str) -> str:
    """`text` with what `pattern` typed replaced by spaces (so no later pattern reads it again)."""
    return pattern.sub(lambda m: " " * len(m.group(0)) if _typed(kind, m) is not None else m.group(0), text)


def _typed(kind: str, match: re.Match[str]) -> Value | None:
    """The value a pattern matched, normalised; None when it is no value (a number counting words)."""
    whole = match.group(0)
    if kind == "date":
        return Value("date", _date(match))
    if kind == "time":
        return Value("time", f"{int(match.group(1)):02d}:{match.group(2)}")
    if kind == "money":
        return Value("money", re.sub(r"[^\d.]", "", whole.replace(",", "")))
    if kind == "weekday":
        return Value("weekday", match.group(1).lower())
    if kind == "quantity":
        unit = match.group(2).lower().replace(" ", "")
        # "2011 Volvo" is a year and a name, not 2011 of a unit.
        if unit in _NOT_UNITS or unit in MONTHS or match.group(2)[:1].isupper():
            return None
        return Value(stem(unit), match.group(1).replace(",", ""))
    return Value("number", whole.replace(",", ""))


def _date(match: re.Match[str]) -> str:
    """A date as "MM-DD" (or the ISO date, or "the DDth" when no month is said)."""
    groups = [g for g in match.groups() if g]
    if not groups:
        return match.group(0)
    month = next((MONTHS[g.lower()[:3] if g.lower()[:3] in MONTHS else g.lower()] for g in groups
                  if g.lower() in MONTHS or g.lower()[:3] in MONTHS), None)
    day = next((int(g) for g in groups if g.isdigit()), 0)
    return f"{month:02d}-{day:02d}" if month else f"--{day:02d}"
