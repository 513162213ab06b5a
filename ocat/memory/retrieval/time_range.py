"""The time a prompt names ("last week", "in March", "yesterday", "two years ago", 2025-03-14) as a span of dates.

Pure: a prompt and "now" in, a `TimeRange` or None out; no store, no clock of its own.

Finding and reading are split. A time expression is found by the patterns below
(`_EXPRESSIONS`): they say only *where* a prompt may name a time, and they are what keeps
ordinary words from being read as dates ("may I ask", "now", "the second one", "April said",
"1/2 cup", "the 2026 calendar"). What an expression *means* (the moment, and whether it is a
day, a week, a month or a year) is dateparser's reading (`DateDataParser.get_date_data`,
past dates preferred, relative to `now`); this module only turns that into a span. An
expression dateparser cannot read gives nothing. dateparser's own search was tried for the
finding and dropped: it reads "we" as a weekday and splits "April 10, 2023" into three dates.

dateparser takes about 0.6 s to import, so it is imported only once the patterns found an
expression: a prompt that names no time never loads it.

The reading is bounded, whatever the prompt: only its first and last SCANNED_CHARS characters
are searched, and at most MAX_EXPRESSIONS expressions are read (dateparser takes ~1.5 ms for
each). A pasted log of 637 KB with a date on every line took 62 s; a question names its time
near its start or its end, not in what it quotes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dateparser.date import DateDataParser

_MONTH = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|december"
    r"|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?"
)
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|mon|tues|tue|wed|thurs|thur|thu|fri|sat|sun)"
_COUNT = r"(?:\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_YEAR = r"(?:19|20)\d{2}"
_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
# Words that make a bare month name or year a time ("in May", not "May I ask"; "in 2024", not
# "the 2026 calendar"). They are also dropped from the front of an expression before dateparser
# reads it, and some of them change the span (`_FROM_ON`, `_UP_TO`, "last").
_LEADS = (
    "in", "during", "since", "from", "until", "till", "before", "after", "by", "of", "early", "late", "mid",
    "last", "this", "on", "around", "between", "the", "start", "beginning", "middle", "end",
)
_KEPT = ("last", "this")
_MONTH_LEAD = r"(?:in|during|since|from|until|till|before|after|by|of|early|late|mid|last|this|on|around|between)"

# Where a prompt may name a time. A match is only a place to look; dateparser says what it means.
_EXPRESSIONS = [
    re.compile(p)  # matched against the prompt in lower case (`_rewritten`): ~2.5x faster than IGNORECASE
    for p in (
        r"\b(?:yesterday|today|tonight)\b",
        r"\b(?:last night|this (?:morning|afternoon|evening))\b",
        rf"\b{_COUNT}\s+(?:day|week|month|year)s?\s+ago\b",
        r"\b(?:last|this)\s+(?:week|month|year)\b",
        rf"\b(?:on|last)\s+{_WEEKDAY}\b",
        rf"\b(?:(?:the\s+)?(?:start|beginning|middle|end)\s+of|{_MONTH_LEAD}(?:\s+the)?)\s+{_MONTH}(?!\w)",
        rf"\b{_MONTH}\s+{_DAY}(?:,?\s+{_YEAR})?\b",
        rf"\b{_MONTH},?\s+{_YEAR}\b",
        rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}(?:,?\s+{_YEAR})?(?!\w)",
        rf"\bbetween\s+(?:the\s+)?\S+\s+and\s+{_MONTH}(?!\w)",
        rf"\b{_YEAR}-\d{{1,2}}(?:-\d{{1,2}})?\b",
        rf"\b\d{{1,2}}/\d{{1,2}}/(?:{_YEAR}|\d{{2}})\b",
        rf"\b(?:in|during|since|from|until|till|before|after)\s+{_YEAR}\b",
    )
]
# Said in ways dateparser does not read, rewritten to ones it does. Each rewrite keeps the
# length (padded with spaces, which dateparser ignores), so a place in the rewritten text is
# the same place in the prompt, and the words shown are the prompt's own.
_REWRITES = [
    # dateparser reads "the day before yesterday" as yesterday.
    (re.compile(r"\b(?:the\s+)?day\s+before\s+yesterday\b"), "2 days ago"),
    (re.compile(r"\ba\s+couple\s+(?:of\s+)?(?=(?:day|week|month|year)s\s+ago\b)"), "2"),
    (re.compile(r"\b(?:a\s+)?few\s+(?=(?:day|week|month|year)s\s+ago\b)"), "3"),
    (re.compile(r"\b(?:the\s+)?(?:this\s+past|past|previous)\s+(?=(?:week|month|year)\b)"), "last"),
]
_UNITS = {
    "day": timedelta(days=1), "week": timedelta(weeks=1), "month": timedelta(days=30), "year": timedelta(days=365),
}
# Words before an expression that make it one end of the span: "since April" runs to now,
# "before May" from the beginning.
_FROM_ON = {"since", "after"}
_UP_TO = {"before", "until", "till", "by"}
# A-Z in lower case and nothing else, so that a place in the lowered prompt is the same place in the prompt.
_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
# Characters searched for a time at each end of a long prompt; a prompt up to twice as long is
# searched whole.
SCANNED_CHARS = 2000
# Expressions read at most (half from each end of a long prompt): each costs dateparser ~1.5 ms.
MAX_EXPRESSIONS = 4
# dateparser's readings of one expression at most (ocat.memory.retrieval.time_range._read).
READS_PER_EXPRESSION = 2
# The longest expression read: a longer one is a run of dates in quoted text, not a question's time.
LONGEST_EXPRESSION = 80


@dataclass(frozen=True)
class TimeRange:
    """A span of time a prompt names: from `start` (None: from the beginning) up to `end`
    (exclusive), both aware; `words` are the prompt's own words for it."""

    start: datetime | None
    end: datetime
    words: str

    def bounds(self) -> tuple[float | None, float]:
        """The span as Unix times (start None when open)."""
        return (None if self.start is None else self.start.timestamp(), self.end.timestamp())

    def holds(self, timestamp: float) -> bool:
        """Whether a moment (Unix time) falls in the span."""
        start, end = self.bounds()
        return (start is None or timestamp >= start) and timestamp < end

    def said(self) -> str:
        """"dated 2026-03-01..2026-03-31, from 'in March'": the span in words, for the user."""
        last = (self.end - timedelta(microseconds=1)).date().isoformat()
        if self.start is None:
            span = f"up to {last}"
        else:
            first = self.start.date().isoformat()
            span = first if first == last else f"{first}..{last}"
        return f"dated {span}, from {self.words!r}"


def might_name_a_time(prompt: str) -> bool:
    """The cheap test: does the prompt hold a time expression at all? (No dateparser.)"""
    return any(p.search(_rewritten(part)[0]) for _, part in scanned_parts(prompt) for p in _EXPRESSIONS)


def time_range(prompt: str, now: datetime) -> TimeRange | None:
    """The span of time `prompt` names, seen from `now`, or None when it names none (or only
    a future one: memory holds the past).

    `now` is aware (the span's days are days in its zone) or naive local time. Several
    expressions give the span that covers them all ("between March and May").
    """
    found: list[_Expression] = []
    rewritten: list[tuple[int, int]] = []
    parts = scanned_parts(prompt)
    for offset, part in parts:
        text, changed = _rewritten(part)
        rewritten += [(offset + a, offset + b) for a, b in changed]
        expressions = [
            # The word before: a lead is short, and a longer word is no lead whatever its end.
            _Expression(offset + a, offset + b, words, {w.lower() for w in text[max(0, a - 32) : a].split()[-1:]})
            for a, b in _regions([m.span() for p in _EXPRESSIONS for m in p.finditer(text)])
            for words in re.split(r"\s+and\s+", text[a:b]) if len(words) <= LONGEST_EXPRESSION
        ]
        # A long prompt's first expressions at its start, its last ones at its end.
        share = MAX_EXPRESSIONS // len(parts)
        found += expressions[:share] if offset == 0 else expressions[-share:]
    if not found:
        return None
    local_now = now.replace(tzinfo=None) if now.tzinfo is not None else now
    parser = _parser(local_now)
    spans: list[tuple[datetime | None, datetime]] = []
    said: list[tuple[int, int]] = []
    for expression in found:
        read = _read(parser, expression.words)
        if read is None:
            continue
        moment, period, dropped = read
        span = _span(expression.words, moment, period, local_now, expression.before | dropped)
        if span is not None and (span[0] is None or span[0] <= local_now):
            spans.append(span)
            said.append((expression.start, expression.end))
    if not spans:
        return None
    first = None if any(s is None for s, _ in spans) else min(s for s, _ in spans if s is not None)
    last = max(e for _, e in spans)
    shown = _regions(said + [r for r in rewritten if any(a < r[1] and r[0] < b for a, b in said)])
    words = " ... ".join(prompt[a:b].strip() for a, b in shown)
    return TimeRange(_aware(first, now), _aware(last, now), words)  # type: ignore[arg-type]


@dataclass(frozen=True)
class _Expression:
    """Words the patterns found (after the rewrites), where the region holding them is in the
    prompt, and the word just before that region ("since", "before"...)."""

    start: int
    end: int
    words: str
    before: set[str]


def scanned_parts(prompt: str) -> list[tuple[int, str]]:
    """The parts of `prompt` searched for a time, each with where it starts: the whole of a
    prompt up to 2 x SCANNED_CHARS long; of a longer one its first and last SCANNED_CHARS
    characters, each cut at a space so that no word is read in half."""
    if len(prompt) <= 2 * SCANNED_CHARS:
        return [(0, prompt)]
    head = prompt[:SCANNED_CHARS]
    head = head[: max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"), 0)] or head
    start = len(prompt) - SCANNED_CHARS
    tail = prompt[start:]
    spaces = [at for at in (tail.find(" "), tail.find("\n"), tail.find("\t")) if at >= 0]
    cut = min(spaces) + 1 if spaces else 0
    return [(0, head), (start + cut, tail[cut:])]


def _rewritten(prompt: str) -> tuple[str, list[tuple[int, int]]]:
    """The prompt in lower case, with the phrasings dateparser misses put in ones it reads at
    the same places, and where the rewritten parts are."""
    text = prompt.translate(_LOWER)
    regions: list[tuple[int, int]] = []
    for pattern, replacement in _REWRITES:
        regions += [m.span() for m in pattern.finditer(text)]
        text = pattern.sub(lambda m, r=replacement: r.ljust(len(m.group())), text)  # type: ignore[misc]
    return text, regions


def _regions(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping spans made one ("in December" and "December 2024": "in December 2024")."""
    merged: list[list[int]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def _parser(now: datetime) -> DateDataParser:
    """dateparser's reader for English, relative to `now`, preferring the past (imported here:
    it is slow to import, and only a prompt that names a time gets this far)."""
    from dateparser.date import DateDataParser

    settings: dict[str, Any] = {"PREFER_DATES_FROM": "past", "RELATIVE_BASE": now, "RETURN_AS_TIMEZONE_AWARE": False}
    return DateDataParser(languages=["en"], settings=settings)


def _read(parser: DateDataParser, words: str) -> tuple[datetime, str, set[str]] | None:
    """dateparser's moment and period for an expression, and the leading words it had to drop
    to read it ("since April": April, and "since"); None when it reads nothing."""
    parts = words.split()
    # Words that only lead ("since", "the", "end of") go first; "last" and "this" are tried
    # with the rest ("last week"), then without ("last March": dateparser reads March).
    first = 0
    while first < len(parts) - 1 and parts[first].lower() in _LEADS and parts[first].lower() not in _KEPT:
        first += 1
    # At most two readings (with "last", then without), whatever the words: READS_PER_EXPRESSION.
    for cut in range(first, min(len(parts), first + READS_PER_EXPRESSION)):
        if cut > first and parts[cut - 1].lower() not in _LEADS:
            return None
        data = parser.get_date_data(" ".join(parts[cut:]))
        if data.date_obj is not None:
            return data.date_obj.replace(tzinfo=None), data.period or "day", {p.lower() for p in parts[:cut]}
    return None


def _span(
    words: str, moment: datetime, period: str, now: datetime, lead: set[str]
) -> tuple[datetime | None, datetime] | None:
    """The span one expression means (naive local times): its calendar day, week, month or year;
    for "N units ago" the days from one unit before that moment to one unit after it."""
    if period not in _UNITS:
        return None  # a time of day alone: no span of days
    day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    if re.search(r"\bago\b", words, re.IGNORECASE):
        unit = _UNITS[period]
        start, end = day - unit, day + unit + timedelta(days=1)
    elif period == "day":
        start, end = day, day + timedelta(days=1)
    elif period == "week":
        start = day - timedelta(days=day.weekday())
        end = start + timedelta(weeks=1)
    elif period == "month":
        start = day.replace(day=1)  # first: 29 February has no day in the year before
        if "last" in lead and (start.year, start.month) == (now.year, now.month):
            start = start.replace(year=start.year - 1)  # "last March", said in March: a year ago
        end = (start + timedelta(days=32)).replace(day=1)
    else:
        start = day.replace(month=1, day=1)
        end = start.replace(year=start.year + 1)
    if lead & _FROM_ON:
        return (end if "after" in lead else start), max(now, end)
    if lead & _UP_TO:
        return None, (start if "before" in lead else end)
    return start, end


def _aware(moment: datetime | None, now: datetime) -> datetime | None:
    """A naive local time in `now`'s zone (the system's when `now` is naive, daylight saving included)."""
    if moment is None:
        return None
    return moment.replace(tzinfo=now.tzinfo) if now.tzinfo is not None else moment.astimezone()
