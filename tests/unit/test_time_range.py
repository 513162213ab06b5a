"""The time a prompt names, as a span of days (ocat.memory.retrieval.time_range): many phrasings,
many prompts that name no time, the edges of months and years; "now" is always given."""

from __future__ import annotations

import sys
from datetime import date, datetime, time, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ocat.memory.retrieval.time_range import TimeRange, might_name_a_time, time_range
from tests.support.examples import examples

# A Tuesday.
NOW = datetime(2025, 7, 1, 12, 0, tzinfo=timezone.utc)


def days(prompt: str, now: datetime = NOW) -> tuple[date | None, date]:
    """The first and last day of the span `prompt` names (first None: from the beginning)."""
    found = time_range(prompt, now)
    assert found is not None, prompt
    last = (found.end - timedelta(microseconds=1)).date()
    return (None if found.start is None else found.start.date()), last


@pytest.mark.parametrize(
    ("prompt", "first", "last"),
    [
        ("what did i ask you yesterday about bread?", "2025-06-30", "2025-06-30"),
        ("anything i said today about the cat", "2025-07-01", "2025-07-01"),
        ("the thing we discussed last night", "2025-06-30", "2025-06-30"),
        ("what was that recipe the day before yesterday", "2025-06-28", "2025-06-30"),
        ("what did we talk about last week", "2025-06-23", "2025-06-29"),  # Monday to Sunday
        ("what did we cover the past week?", "2025-06-23", "2025-06-29"),
        ("remind me what we said this week", "2025-06-30", "2025-07-06"),
        ("what did i decide last month about the rates", "2025-06-01", "2025-06-30"),
        ("in March we discussed the kitchen tiles", "2025-03-01", "2025-03-31"),
        ("back in january, what did the vet say", "2025-01-01", "2025-01-31"),
        ("what did i ask in early march", "2025-03-01", "2025-03-31"),
        ("at the end of january we picked a plan", "2025-01-01", "2025-01-31"),
        ("what did i say in december 2024", "2024-12-01", "2024-12-31"),
        ("last year we talked about taxes", "2024-01-01", "2024-12-31"),
        ("what did we plan in 2024", "2024-01-01", "2024-12-31"),
        ("this year's rates", "2025-01-01", "2025-12-31"),
        ("3 days ago you told me a trick", "2025-06-27", "2025-06-29"),  # a day either side
        ("two weeks ago we talked about the sink", "2025-06-10", "2025-06-24"),
        ("a few weeks ago we talked about rates", "2025-06-03", "2025-06-17"),
        ("a couple of weeks ago i asked about the cat", "2025-06-10", "2025-06-24"),
        ("a month ago i mentioned a deadline", "2025-05-02", "2025-07-01"),
        ("two years ago i went to oaxaca", "2022-07-01", "2024-06-30"),
        ("what happened on 2025-03-14", "2025-03-14", "2025-03-14"),
        ("the plan from 2025-03", "2025-03-01", "2025-03-31"),
        ("on 3/14/2025 i asked about glue", "2025-03-14", "2025-03-14"),
        ("on jan 15 we chose the paint", "2025-01-15", "2025-01-15"),
        ("what did i decide on the 15th of march", "2025-03-15", "2025-03-15"),
        ("on March 3rd, what did the contractor say", "2025-03-03", "2025-03-03"),
        ("what did she show me on October 13, 2024?", "2024-10-13", "2024-10-13"),
        ("what did we decide on monday", "2025-06-30", "2025-06-30"),
        ("last friday you gave me a recipe", "2025-06-27", "2025-06-27"),
        ("since april, what changed", "2025-04-01", "2025-07-01"),
        ("after march, did the price move", "2025-04-01", "2025-07-01"),
        ("between march and may we talked about flights", "2025-03-01", "2025-05-31"),
        ("what did i ask you in MAY", "2025-05-01", "2025-05-31"),
    ],
)
def test_a_named_time_is_its_span(prompt: str, first: str, last: str) -> None:
    assert days(prompt) == (date.fromisoformat(first), date.fromisoformat(last))


def test_an_open_start() -> None:
    assert days("what did we decide before may") == (None, date(2025, 4, 30))
    assert days("everything until february") == (None, date(2025, 2, 28))


@pytest.mark.parametrize(
    "prompt",
    [
        "may i ask about sourdough hydration?",
        "what did i say about the sun and my plants",
        "the second one please",
        "now tell me about the cat",
        "what did i pay for 3 prints",
        "1/2 cup of flour or more?",
        "what did april say about the logo",
        "what does june think of the colours",
        "how much does each 2026 calendar cost me to print?",
        "when was the RRSP deadline for my 2024 taxes?",
        "we march on to the next step",
        "what's the plan for next week",  # the future: memory has nothing there
        "what should i pack for next month's trip",
        "at 3pm i have a call, help me prepare",
        "the last time we spoke about bread",
        "at last, the kitchen is done",
        "give me a 16 week plan for a marathon",
        "a beginner program for 3 days a week",
        "is a 7 year old cat a senior?",
        "how many days are there in a week",
        "sat down to draw, any warm-up ideas?",
        "set a timer for 10 minutes",
        "what did we say about version 2.1.3",
        "my phone number is 514 555 0199",
        "the invoice 2025-INV-7 is late",
        "every monday i go climbing",
        "decorate the wed cake",
        "mar the surface with sandpaper?",
        "",
        "   ",
    ],
)
def test_no_time_named(prompt: str) -> None:
    assert time_range(prompt, NOW) is None


def test_the_cheap_test_agrees_with_the_patterns() -> None:
    assert might_name_a_time("what did we say last week")
    assert might_name_a_time("a few weeks ago")
    assert not might_name_a_time("may i ask about sourdough")
    assert not might_name_a_time("the second one please")


def test_prompts_without_a_time_never_load_dateparser(monkeypatch: pytest.MonkeyPatch) -> None:
    # An import of dateparser now fails: a prompt that gets that far would raise.
    for name in [m for m in sys.modules if m == "dateparser" or m.startswith("dateparser.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "dateparser", None)
    for prompt in ("may i ask about sourdough", "what did i pay for 3 prints", "now, the cat", "the 2026 calendar"):
        assert time_range(prompt, NOW) is None
    with pytest.raises(ImportError):
        time_range("what did we say last week", NOW)


@pytest.mark.parametrize(
    ("now", "prompt", "first", "last"),
    [
        # "in March" is the latest March that has begun.
        (datetime(2025, 3, 10, tzinfo=timezone.utc), "in march", "2025-03-01", "2025-03-31"),
        (datetime(2025, 2, 10, tzinfo=timezone.utc), "in march", "2024-03-01", "2024-03-31"),
        (datetime(2025, 2, 10, tzinfo=timezone.utc), "in december", "2024-12-01", "2024-12-31"),
        # "last March", said in March: a year ago.
        (datetime(2025, 3, 10, tzinfo=timezone.utc), "last march", "2024-03-01", "2024-03-31"),
        # Month and year edges.
        (datetime(2025, 1, 1, 9, tzinfo=timezone.utc), "yesterday", "2024-12-31", "2024-12-31"),
        (datetime(2025, 1, 1, 9, tzinfo=timezone.utc), "last month", "2024-12-01", "2024-12-31"),
        (datetime(2025, 1, 1, 9, tzinfo=timezone.utc), "last year", "2024-01-01", "2024-12-31"),
        (datetime(2025, 3, 1, 9, tzinfo=timezone.utc), "last month", "2025-02-01", "2025-02-28"),
        (datetime(2024, 3, 1, 9, tzinfo=timezone.utc), "last month", "2024-02-01", "2024-02-29"),
        (datetime(2025, 1, 2, 9, tzinfo=timezone.utc), "last week", "2024-12-23", "2024-12-29"),
        (datetime(2024, 3, 1, 9, tzinfo=timezone.utc), "on february 29", "2024-02-29", "2024-02-29"),
    ],
)
def test_edges(now: datetime, prompt: str, first: str, last: str) -> None:
    assert days(prompt, now) == (date.fromisoformat(first), date.fromisoformat(last))


def test_days_are_days_where_the_user_is() -> None:
    montreal = ZoneInfo("America/Montreal")
    # 01:00 on 1 July in Montreal is still 30 June there, though 1 July in UTC.
    found = time_range("yesterday", datetime(2025, 7, 1, 1, 0, tzinfo=montreal))
    assert found is not None and found.start == datetime(2025, 6, 30, tzinfo=montreal)
    # March, across the change to summer time: the span starts at local midnight.
    march = time_range("in march", datetime(2025, 7, 1, tzinfo=montreal))
    assert march is not None and march.bounds() == (
        datetime(2025, 3, 1, 5, tzinfo=timezone.utc).timestamp(),
        datetime(2025, 4, 1, 4, tzinfo=timezone.utc).timestamp(),
    )


def test_the_same_words_move_with_now() -> None:
    assert days("last week", datetime(2025, 7, 1, tzinfo=timezone.utc)) != days(
        "last week", datetime(2025, 8, 1, tzinfo=timezone.utc)
    )


def test_only_the_past() -> None:
    assert time_range("what did we plan for next week", NOW) is None
    assert time_range("in 2030", NOW) is None
    # A span that has begun counts, though it runs past now.
    assert days("this month") == (date(2025, 7, 1), date(2025, 7, 31))


def test_the_words_shown_are_the_prompts_own() -> None:
    assert time_range("What did we say In March about tiles?", NOW) == TimeRange(
        datetime(2025, 3, 1, tzinfo=timezone.utc), datetime(2025, 4, 1, tzinfo=timezone.utc), "In March"
    )
    found = time_range("a couple of weeks ago, the sink", NOW)
    assert found is not None and found.words == "a couple of weeks ago"
    assert found.said() == "dated 2025-06-10..2025-06-24, from 'a couple of weeks ago'"
    one_day = time_range("yesterday", NOW)
    assert one_day is not None and one_day.said() == "dated 2025-06-30, from 'yesterday'"
    open_start = time_range("before may", NOW)
    assert open_start is not None and open_start.said() == "dated up to 2025-04-30, from 'before may'"


def test_holds() -> None:
    march = time_range("in march", NOW)
    assert march is not None
    assert march.holds(datetime(2025, 3, 31, 23, 59, tzinfo=timezone.utc).timestamp())
    assert not march.holds(datetime(2025, 4, 1, tzinfo=timezone.utc).timestamp())
    assert not march.holds(datetime(2025, 2, 28, 23, 59, tzinfo=timezone.utc).timestamp())


_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
# One phrasing of every kind the patterns find and the rewrites turn into one dateparser reads,
# with every month and weekday where the words take one, and dates that exist only in a leap year.
EXPRESSIONS = (
    "yesterday", "today", "tonight", "last night", "this morning", "this afternoon", "this evening",
    "the day before yesterday", "a couple of days ago", "a few weeks ago", "3 days ago", "a week ago",
    "two months ago", "a month ago", "a year ago", "12 years ago", "last week", "this week", "last month",
    "this month", "last year", "this year", "the past week", "the previous month", "this past year",
    *(f"on {day}" for day in _WEEKDAYS), *(f"last {day}" for day in _WEEKDAYS),
    *(f"{lead} {month}" for month in _MONTHS for lead in ("in", "last")),
    *(f"{lead} february" for lead in ("since", "before", "after", "until", "early", "mid", "late", "the end of",
                                      "the start of")),
    "between january and march", "between the end of november and february",
    "february 29", "feb 29, 2028", "29 february", "29th of february 2028", "february 2028", "march 31",
    "on the 31st of january", "31 december 2027", "2028-02-29", "2028-02", "2/29/2028", "2/29/28",
    "in 2027", "since 2028", "before 2029",
)


def _well_formed(prompt: str, now: datetime) -> None:
    """The span a prompt names, seen from `now`: read without an error, a span that starts at the
    start of a day and has begun by `now` (or none at all)."""
    found = time_range(f"what did we say {prompt}", now)
    if found is None:
        return
    assert found.start is None or found.start < found.end, (prompt, now)
    assert found.start is None or found.start <= now, (prompt, now)
    assert found.start is None or found.start.time() == time(0), (prompt, now)  # a day's start


# Where a calendar's arithmetic breaks: a month's first and last day, across a year's end, and
# 29 February (2028 is a leap year; 2027 and 2029 are not).
EDGE_DAYS = sorted({
    *(date(year, month, 1) for year in (2027, 2028, 2029) for month in range(1, 13) if year == 2028 or month in (1, 3)),
    *(date(year, month, 1) - timedelta(days=1) for year in (2028, 2029) for month in range(1, 13) if year == 2028
      or month in (1, 3)),
    date(2028, 2, 28), date(2028, 2, 29), date(2029, 12, 31),
})


@pytest.mark.parametrize("day", EDGE_DAYS, ids=str)
def test_every_expression_on_the_days_a_calendar_breaks(day: date) -> None:
    # "last February", asked on 29 February 2028, once raised "day is out of range for month".
    now = datetime(day.year, day.month, day.day, 12, tzinfo=timezone.utc)
    for prompt in EXPRESSIONS:
        _well_formed(prompt, now)


@settings(max_examples=examples(400), deadline=None)
@given(st.dates(date(2027, 1, 1), date(2029, 12, 31)), st.integers(0, 23), st.sampled_from(EXPRESSIONS))
@example(date(2028, 2, 29), 12, "last february")
def test_any_day_of_three_years_and_any_expression(day: date, hour: int, prompt: str) -> None:
    _well_formed(prompt, datetime(day.year, day.month, day.day, hour, tzinfo=timezone.utc))


def test_last_february_asked_on_29_february_is_the_february_before() -> None:
    assert days("what did we say last february", datetime(2028, 2, 29, 12, tzinfo=timezone.utc)) == (
        date(2027, 2, 1), date(2027, 2, 28))
    assert days("what did we say last february", datetime(2029, 2, 28, 12, tzinfo=timezone.utc)) == (
        date(2028, 2, 1), date(2028, 2, 29))


# A pasted log: one ISO date a line (a 637 KB one took 62 s to read for a time).
LOG = "\n".join(f"2025-{n % 12 + 1:02d}-{n % 28 + 1:02d} 12:00:01 INFO job {n} finished in {n % 97} ms"
                for n in range(3000))


class _Counted:
    """What reading a prompt's time looked at: the characters searched, dateparser's readings."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from ocat.memory.retrieval import time_range as module

        self.chars = self.reads = 0
        rewritten, parser = module._rewritten, module._parser

        def searched(text: str) -> Any:
            self.chars += len(text)
            return rewritten(text)

        def counting_parser(now: datetime) -> Any:
            made = parser(now)
            reading = made.get_date_data

            def get_date_data(words: str) -> Any:
                self.reads += 1
                return reading(words)

            made.get_date_data = get_date_data  # type: ignore[method-assign]
            return made

        monkeypatch.setattr(module, "_rewritten", searched)
        monkeypatch.setattr(module, "_parser", counting_parser)


def test_a_long_prompt_is_searched_at_its_ends_and_a_few_expressions_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    from ocat.memory.retrieval.time_range import MAX_EXPRESSIONS, READS_PER_EXPRESSION, SCANNED_CHARS

    counted = _Counted(monkeypatch)
    found = time_range(f"{LOG}\nwhat did we decide about these jobs last week?", NOW)
    assert found is not None and found.words.endswith("last week")
    assert counted.chars <= 2 * SCANNED_CHARS < len(LOG) // 30
    assert 0 < counted.reads <= MAX_EXPRESSIONS * READS_PER_EXPRESSION
    counted.chars = counted.reads = 0
    found = time_range(f"last week you saw this log:\n{LOG}", NOW)
    assert found is not None and found.words.startswith("last week")
    assert counted.chars <= 2 * SCANNED_CHARS and counted.reads <= MAX_EXPRESSIONS * READS_PER_EXPRESSION


def test_a_time_named_only_in_the_middle_of_a_long_paste_is_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    filler = "the pump log says nothing of note here " * 400
    counted = _Counted(monkeypatch)
    assert time_range(f"{filler} in march {filler}", NOW) is None
    assert counted.reads == 0
    assert might_name_a_time(f"{filler} in march") and not might_name_a_time(f"{filler} in march {filler}")


def test_the_ends_of_a_long_prompt_are_cut_between_words() -> None:
    from ocat.memory.retrieval.time_range import SCANNED_CHARS, scanned_parts

    prompt = "x" * (SCANNED_CHARS - 3) + " 2025-03-14 " + "y " * SCANNED_CHARS + "2025-04-01 " + "z" * (SCANNED_CHARS - 5)
    (head_at, head), (tail_at, tail) = scanned_parts(prompt)
    assert head_at == 0 and head == "x" * (SCANNED_CHARS - 3)  # no half of 2025-03-14
    assert prompt[tail_at:] == tail and tail == "z" * (SCANNED_CHARS - 5)  # no half of 2025-04-01
    assert scanned_parts("short") == [(0, "short")]


def test_a_run_of_expressions_costs_a_bounded_number_of_readings(monkeypatch: pytest.MonkeyPatch) -> None:
    from ocat.memory.retrieval.time_range import MAX_EXPRESSIONS, READS_PER_EXPRESSION

    counted = _Counted(monkeypatch)
    time_range(" ".join(["since the end of last last last last last march"] * 40), NOW)
    assert counted.reads <= MAX_EXPRESSIONS * READS_PER_EXPRESSION
