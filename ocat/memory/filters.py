"""Explicit metadata filters on a search (CLI `--where`, the MCP tools' filters), as Chroma `where`s.

Filtered searches are rare and asked for by name, so they use Chroma's `where`: exact, and
fast enough for an explicit query. The chat's per-turn retrieval never filters (Chroma's
`where` is slow on large collections); it over-fetches and drops ids in Python instead.

A condition applies to one kind of record or both: `thread_id` only exists on exchanges,
`section` only on document chunks, `date` on both (an exchange's `timestamp`, a chunk's
`date_added`). A kind that cannot match a condition is not searched at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable

from ocat.errors import UsageError
from ocat.models import EXCHANGE_FIELDS, RecordKind

# --where KEY=VALUE, or a comparison: KEY>=VALUE, KEY<=VALUE, KEY>VALUE, KEY<VALUE, KEY!=VALUE.
_CONDITION = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*(!=|>=|<=|=|>|<)(.*)$", re.S)
_OPERATORS = {"=": "$eq", "!=": "$ne", ">=": "$gte", "<=": "$lte", ">": "$gt", "<": "$lt"}
KINDS: tuple[RecordKind, ...] = ("exchange", "document")

# Keys whose stored values are not strings, so a typed-in value is converted to match.
_INT_KEYS = {"ocd_number", "chunk_index", "total_chunks", "thread_continuation_seq"}
_FLOAT_KEYS = {"timestamp", "date_added"}
_BOOL_KEYS = {"manual_entry"}
# Keys only document chunks carry (exchange keys are EXCHANGE_FIELDS); a key in neither list
# is metadata a caller attached when saving (MCP memory_save), so it is a document key too.
DOCUMENT_KEYS = frozenset(
    {"kind", "source", "source_file", "source_path", "source_folder", "filename", "section", "prefix",
     "ocd_number", "chunk_index", "total_chunks", "manual_entry", "content_hash", "document_id", "date_added"}
)
# Exchanges have no `source` field; they answer to this one.
CHAT_SOURCE = "chat"
Scalar = str | int | float | bool


@dataclass(frozen=True)
class Condition:
    """One metadata condition: `key op value` (op is a Chroma operator such as `$eq`)."""

    key: str
    op: str
    value: Scalar


@dataclass(frozen=True)
class Filters:
    """What a filtered search keeps: conditions on metadata, and optionally one kind."""

    conditions: tuple[Condition, ...] = ()
    kind: RecordKind | None = None

    def __bool__(self) -> bool:
        return bool(self.conditions) or self.kind is not None

    def kinds(self) -> list[RecordKind]:
        """The kinds of record these filters can match."""
        return [k for k in KINDS if self.where_for(k) is not _NEVER]

    def where_for(self, kind: RecordKind) -> dict[str, Any] | None | _Never:
        """The Chroma `where` for one kind: None for no filter, `_NEVER` if the kind cannot match."""
        if self.kind is not None and self.kind != kind:
            return _NEVER
        clauses: list[dict[str, Any]] = []
        for condition in self.conditions:
            clause = _clause(condition, kind)
            if clause is _NEVER:
                return _NEVER
            if clause is not None:
                clauses.append(clause)  # type: ignore[arg-type]
        if not clauses:
            return None
        return clauses[0] if len(clauses) == 1 else {"$and": clauses}


class _Never:
    """Marks a kind that a filter rules out."""


_NEVER = _Never()


def _clause(condition: Condition, kind: RecordKind) -> dict[str, Any] | None | _Never:
    key, op, value = condition.key, condition.op, condition.value
    if key == "date":
        key = "timestamp" if kind == "exchange" else "date_added"
    elif key == "source" and kind == "exchange":
        # Every exchange comes from the chat: `source=chat` keeps them all, anything else none.
        matches = {"$eq": value == CHAT_SOURCE, "$ne": value != CHAT_SOURCE}.get(op)
        return _NEVER if not matches else None
    elif key == "source" and op == "$eq" and value == CHAT_SOURCE:
        return _NEVER  # documents never come from the chat (memory_save refuses the label)
    elif key == "kind":
        matches = {"$eq": value == kind, "$ne": value != kind}.get(op)
        return _NEVER if not matches else None
    elif kind == "exchange" and key not in EXCHANGE_FIELDS:
        return _NEVER
    elif kind == "document" and key in EXCHANGE_FIELDS:
        return _NEVER
    if key not in _INT_KEYS | _FLOAT_KEYS | _BOOL_KEYS | DOCUMENT_KEYS | set(EXCHANGE_FIELDS) and op in ("$eq", "$ne"):
        # A caller's own key: its value may have been saved as a number or as text.
        variants = _variants(value)
        if len(variants) > 1:
            joined = [{key: {op: v}} for v in variants]
            return {"$or": joined} if op == "$eq" else {"$and": joined}
    return {key: {op: value}}


def _variants(value: Scalar) -> list[Scalar]:
    """A value and its other spellings: "42" and 42, "true" and True."""
    if isinstance(value, bool):
        return [value, str(value).lower()]
    if isinstance(value, (int, float)):
        return [value, str(value)]
    found: list[Scalar] = [value]
    if re.fullmatch(r"-?\d+", value):
        found.append(int(value))
    elif re.fullmatch(r"-?\d+\.\d*", value):
        found.append(float(value))
    elif value.lower() in ("true", "false"):
        found.append(value.lower() == "true")
    return found


def parse_where(items: Iterable[str]) -> Filters:
    """Filters from `--where` arguments (`key=value`, or `key>=value` etc.); UsageError if malformed."""
    conditions: list[Condition] = []
    kind: RecordKind | None = None
    for item in items:
        match = _CONDITION.match(item)
        if not match:
            raise UsageError(f"--where expects KEY=VALUE (or KEY>=VALUE, KEY<=VALUE, ...), got {item!r}")
        key, op, raw = match.group(1), _OPERATORS[match.group(2)], match.group(3).strip()
        if key == "kind" and op == "$eq":
            kind = _kind(raw)
            continue
        conditions.append(Condition(key, op, typed_value(key, raw, op)))
    return Filters(tuple(conditions), kind)


def _kind(value: str) -> RecordKind:
    if value not in KINDS:
        raise UsageError(f"kind must be exchange or document, got {value!r}")
    return value  # type: ignore[return-value]


def typed_value(key: str, raw: Scalar, op: str = "$eq") -> Scalar:
    """A filter value converted to the type the store holds for `key` (dates to Unix time)."""
    if key in ("date", "timestamp", "date_added"):
        return parse_time(raw, end=op in ("$lte", "$gt"))
    if op in ("$gt", "$gte", "$lt", "$lte"):
        number = _number(raw)
        if number is None:
            raise UsageError(f"{key}: a comparison needs a number, got {raw!r}")
        return number
    if key in _INT_KEYS:
        number = _number(raw)
        if number is None or number != int(number):
            raise UsageError(f"{key} is a whole number, got {raw!r}")
        return int(number)
    if key in _BOOL_KEYS:
        if isinstance(raw, bool):
            return raw
        if str(raw).lower() not in ("true", "false"):
            raise UsageError(f"{key} is true or false, got {raw!r}")
        return str(raw).lower() == "true"
    if key in DOCUMENT_KEYS or key in EXCHANGE_FIELDS:
        text = str(raw)
        # Stored normalised (see ocat.memory.folders): sections lower-case, prefixes upper-case.
        return text.lower() if key == "section" else text.upper() if key == "prefix" else text
    return raw


def _number(raw: Scalar) -> float | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, (int, float)):
        return raw
    try:
        value = float(raw)
    except ValueError:
        return None
    return int(value) if value.is_integer() and "." not in raw else value


def parse_time(raw: Scalar, *, end: bool = False) -> float:
    """Unix time from a number (or its text), an ISO date (`2026-11-22`) or date-time (`2026-11-22T14:00`).

    A bare date is local midnight; with `end` (an upper bound), the end of that day, so
    `date<=2026-11-22` includes the whole day.
    """
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return float(raw)
    text = str(raw).strip()
    if re.fullmatch(r"\d+(\.\d*)?", text) and len(text.split(".")[0]) > 8:
        return float(text)  # a Unix time (a bare 8-digit number would be a date: 20261122)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"expected a date such as 2026-11-22 or 2026-11-22T14:30, got {text!r}") from None
    stamp = moment.timestamp()
    if end and len(text) == 10:  # a bare date: the whole day
        stamp += 86400 - 0.001
    return stamp


@dataclass
class FilterSpec:
    """Named filters as the MCP search tool takes them; `to_filters` checks and converts them."""

    source: str | None = None
    thread_id: str | None = None
    session_id: str | None = None
    kind: RecordKind | None = None
    since: str | None = None
    until: str | None = None
    where: dict[str, Scalar] = field(default_factory=dict)

    def to_filters(self) -> Filters:
        """The Filters these name; UsageError for a bad date or value."""
        conditions = [
            Condition(key, "$eq", typed_value(key, value))
            for key, value in (("source", self.source), ("thread_id", self.thread_id), ("session_id", self.session_id))
            if value is not None
        ]
        if self.since is not None:
            conditions.append(Condition("date", "$gte", parse_time(self.since)))
        if self.until is not None:
            conditions.append(Condition("date", "$lte", parse_time(self.until, end=True)))
        kind = self.kind
        for key, value in self.where.items():
            if key == "kind":
                kind = _kind(str(value))
                continue
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", key):
                raise UsageError(f"where: {key!r} is not a metadata key")
            conditions.append(Condition(key, "$eq", typed_value(key, value)))
        return Filters(tuple(conditions), kind)
