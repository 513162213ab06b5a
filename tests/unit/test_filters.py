"""Metadata filters: parsing `--where`, the Chroma `where` per kind, and filtered searches."""

from __future__ import annotations

from datetime import datetime

import pytest

from ocat.config.loading import shipped_settings
from ocat.errors import UsageError
from ocat.memory import MemoryStore, RetrievalLimits, add_text
from ocat.memory.retrieval.filters import FilterSpec, parse_time, parse_where
from ocat.memory.retrieval.across_stores import search_store
from ocat.records import Exchange

OPTIONS = shipped_settings().chunking
LIMITS = RetrievalLimits(exchange_results=10, document_results=10, exchange_threshold=0.5, document_threshold=0.5)


def test_where_parsing_types_values_by_key() -> None:
    filters = parse_where(["prefix=acme", "ocd_number=042", "section=Open Risks", "manual_entry=false", "team=ops"])
    document = filters.where_for("document")
    assert document == {"$and": [
        {"prefix": {"$eq": "ACME"}},
        {"ocd_number": {"$eq": 42}},
        {"section": {"$eq": "open risks"}},
        {"manual_entry": {"$eq": False}},
        {"team": {"$eq": "ops"}},
    ]}
    # Exchanges have none of these fields, so they are not searched at all.
    assert filters.kinds() == ["document"]


def test_dates_apply_to_each_kinds_own_field() -> None:
    filters = parse_where(["date>=2026-03-01", "date<=2026-03-31"])
    start, end = parse_time("2026-03-01"), parse_time("2026-03-31", end=True)
    assert end - parse_time("2026-03-31") == pytest.approx(86400, abs=0.01)  # the whole last day
    assert filters.where_for("exchange") == {"$and": [{"timestamp": {"$gte": start}}, {"timestamp": {"$lte": end}}]}
    assert filters.where_for("document") == {"$and": [{"date_added": {"$gte": start}}, {"date_added": {"$lte": end}}]}
    assert filters.kinds() == ["exchange", "document"]
    assert parse_where(["timestamp>=1795316680.5"]).where_for("exchange") == {"timestamp": {"$gte": 1795316680.5}}


def test_kind_thread_and_source_pick_the_kind() -> None:
    assert parse_where(["kind=exchange"]).kinds() == ["exchange"]
    assert parse_where(["thread_id=t1"]).kinds() == ["exchange"]
    assert parse_where(["source=chat"]).kinds() == ["exchange"]
    assert parse_where(["source=chat"]).where_for("exchange") is None
    assert parse_where(["source=cli"]).kinds() == ["document"]
    assert parse_where(["thread_id=t1", "section=goals"]).kinds() == []


def test_a_callers_own_key_matches_a_number_or_its_text() -> None:
    assert FilterSpec(where={"year": 2026}).to_filters().where_for("document") == {
        "$or": [{"year": {"$eq": 2026}}, {"year": {"$eq": "2026"}}]
    }


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (["nonsense"], "--where expects KEY=VALUE"),
        (["=x"], "--where expects KEY=VALUE"),
        (["kind=email"], "kind must be exchange or document"),
        (["ocd_number=4.5"], "whole number"),
        (["manual_entry=maybe"], "true or false"),
        (["date>=yesterday"], "expected a date"),
        (["chunk_index>=many"], "needs a number"),
    ],
)
def test_malformed_filters_are_usage_errors(items: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_where(items)


def test_filtered_search_over_both_kinds(store: MemoryStore) -> None:
    march = datetime(2026, 3, 10, 12).timestamp()
    may = datetime(2026, 5, 10, 12).timestamp()
    store.add_exchanges(
        [
            Exchange("deploy the api", "frankfurt cluster", "t1", "s1", exchange_id="e1", timestamp=march),
            Exchange("deploy the workers", "dublin cluster", "t2", "s2", exchange_id="e2", timestamp=may),
        ]
    )
    add_text(store, "deploy notes for the billing cluster", OPTIONS, source="cli", manual_entry=False)

    def ids(*where: str) -> set[str]:
        return {h.id for h in search_store(store, "deploy cluster", LIMITS, parse_where(where))}

    assert len(ids()) == 3
    assert ids("thread_id=t2") == {"e2"}
    assert ids("date<2026-04-01") == {"e1"}
    assert ids("date>=2026-04-01", "kind=exchange") == {"e2"}
    assert ids("source=cli") == {h for h in ids() if h.startswith("doc-")}
    assert ids("source=nowhere") == set()
    hits = search_store(store, "deploy cluster", LIMITS, parse_where(["kind=exchange"]), limit=1)
    assert len(hits) == 1
