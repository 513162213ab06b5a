"""Explicit metadata filters on a search (CLI `--where`, the MCP tools' filters), as Chroma `where`s.

Filtered searches are rare and asked for by name, so they use Chroma's `where`: exact, and
fast enough for an explicit query. The chat's per-turn retrieval never filters (Chroma's
`where` is slow on large collections); it over-fetches and drops ids in Python instead.

A condition applies to one kind of record or both: `thread_id` only exists on exchanges,
`section` only on document chunks, `date` on both (an exchange's `timestamp`, a chunk's
`date_added`), `project` and `git_branch` on both (on exchanges of a project; on documents
saved with them). A kind that cannot match a condition is not searched at all.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable

from ocat.errors import UsageError
from ocat.text.limits import FIRST_DATE, INT64_MAX, INT64_MIN, LAST_DATE
from ocat.records import EXCHANGE_FIELDS, RECORD_KINDS, RecordKind

# --where KEY=VALUE, or a comparison: KEY>=VALUE, KEY<=VALUE, KEY>VALUE, KEY<VALUE, KEY!=VALUE.
_CONDITION = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*(!=|>=|<=|=|>|<)(.*)$", re.S)
_OPERATORS = {"=": "$eq", "!=": "$ne", ">=": "$gte", "<=": "$lte", ">": "$gt", "<": "$lt"}

# Keys whose stored values are not strings, so a typed-in value is converted to match.
_INT_KEYS = {"ocd_number", "chunk_index", "total_chunks", "thread_continuation_seq"}
_FLOAT_KEYS = {"timestamp", "date_added"}
_BOOL_KEYS = {"manual_entry"}
# Keys only document chunks carry (exchange keys are EXCHANGE_FIELDS); a key in neither list
# is metadata a caller attached when saving (MCP remember), so it is a document key too.
DOCUMENT_KEYS = frozenset(
    {"kind", "source", "source_file", "source_path", "source_folder", "filename", "section", "prefix",
     "ocd_number", "chunk_index", "total_chunks", "manual_entry", "content_hash", "document_id", "date_added"}
)
# Metadata an exchange may carry beyond its fields (an imported agent session's folder and
# branch, a chat's project): a filter on them searches exchanges, and documents too.
EXCHANGE_EXTRAS = frozenset({"project", "git_branch"})
# Exchanges have no `source` field; they answer to this one.
CHAT_SOURCE = "chat"
Scalar = str | int | float | bool
# Digits a whole number can have and still fit in 64 bits (checked before int(), which
# refuses over 4300 digits and is slow long before that).
_INT64_DIGITS = 19


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
        return [k for k in RECORD_KINDS if self.where_for(k) is not _NEVER]

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
        return _NEVER  # documents never come from the chat (remember refuses the label)
    elif key == "kind":
        matches = {"$eq": value == kind, "$ne": value != kind}.get(op)
        return _NEVER if not matches else None
    elif kind == "exchange" and key not in EXCHANGE_FIELDS and key not in EXCHANGE_EXTRAS:
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
        # A number too large to be stored as one can only have been saved as text.
        if len(value.lstrip("-")) <= _INT64_DIGITS and INT64_MIN <= int(value) <= INT64_MAX:
            found.append(int(value))
    elif re.fullmatch(r"-?\d+\.\d*", value):
        if math.isfinite(float(value)):
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
    for kind in RECORD_KINDS:
        if value == kind:
            return kind
    raise UsageError(f"kind must be exchange or document, got {value!r}")


def typed_value(key: str, raw: Scalar, op: str = "$eq") -> Scalar:
    """A filter value converted to the type the store holds for `key` (dates to Unix time).

    UsageError, naming the key, for a value of the wrong type or one the store cannot
    compare with (a date no timestamp holds, a number past 64 bits, infinity).
    """
    if key in ("date", "timestamp", "date_added"):
        try:
            return parse_time(raw, end=op in ("$lte", "$gt"))
        except UsageError as exc:
            raise UsageError(f"{key}: {exc}") from None
    if op in ("$gt", "$gte", "$lt", "$lte"):
        number = _number(raw)
        if number is None:
            raise UsageError(f"{key}: a comparison needs a number, got {_shown(raw)}")
        return _in_range(key, number, raw)
    if key in _INT_KEYS:
        number = _number(raw)
        if number is None or number != int(number):
            raise UsageError(f"{key} is a whole number, got {_shown(raw)}")
        return _in_range(key, int(number), raw)
    if key in _BOOL_KEYS:
        if isinstance(raw, bool):
            return raw
        if str(raw).lower() not in ("true", "false"):
            raise UsageError(f"{key} is true or false, got {raw!r}")
        return str(raw).lower() == "true"
    if key in DOCUMENT_KEYS or key in EXCHANGE_FIELDS:
        text = str(raw)
        # Stored normalised (see ocat.memory.ingest.folders): sections lower-case, prefixes upper-case.
        return text.lower() if key == "section" else text.upper() if key == "prefix" else text
    if isinstance(raw, (int, float)):  # a caller's own key, given a number (MCP `where`)
        return _in_range(key, raw)
    return raw


def _number(raw: Scalar) -> float | None:
    """A finite number from a value or its text; None if it is not one."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, (int, float)):
        return raw if isinstance(raw, int) or math.isfinite(raw) else None
    if re.fullmatch(r"\s*[+-]?\d{1,40}\s*", raw):
        return int(raw)  # exactly: through a float, 2**63 - 1 would become 2**63
    try:
        value = float(raw)
    except ValueError:
        return None
    if not math.isfinite(value):  # "1e999", "inf", "nan": no stored value compares with these
        return None
    return int(value) if value.is_integer() and "." not in raw else value


def _in_range(key: str, number: int | float, raw: Scalar | None = None) -> int | float:
    """The number, if the store can compare with it: finite, and whole numbers within 64 bits.

    `raw` is what the caller typed, for the message (`1e300` rather than its 301 digits).
    """
    shown = _shown(number if raw is None else raw)
    if isinstance(number, float) and not math.isfinite(number):
        raise UsageError(f"{key}: {shown} is not a number the store can compare with")
    if isinstance(number, int) and not INT64_MIN <= number <= INT64_MAX:
        raise UsageError(f"{key}: {shown} is out of range (whole numbers go up to {INT64_MAX})")
    return number


def _shown(raw: object, limit: int = 40) -> str:
    """A value for an error message, cut short: a 5000-digit number is not worth repeating."""
    if isinstance(raw, int) and raw.bit_length() > 128:
        # repr() itself refuses past 4300 digits; the bit length gives the digits near enough.
        return f"a number of about {int(raw.bit_length() * math.log10(2)) + 1} digits"
    text = repr(raw)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_time(raw: Scalar, *, end: bool = False) -> float:
    """Unix time from a number (or its text), an ISO date (`2026-11-22`) or date-time (`2026-11-22T14:00`).

    A bare date is local midnight; with `end` (an upper bound), the end of that day, so
    `date<=2026-11-22` includes the whole day. UsageError for anything else, and for a
    date or number no timestamp can hold (`0001-01-01`, `1e999`).
    """
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return _finite_time(raw)
    text = str(raw).strip()
    if re.fullmatch(r"\d+(\.\d*)?", text) and len(text.split(".")[0]) > 8:
        return _finite_time(float(text), text)  # a Unix time (a bare 8-digit number would be a date: 20261122)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"expected a date such as 2026-11-22 or 2026-11-22T14:30, got {_shown(text)}") from None
    try:
        stamp = moment.timestamp()
    except (ValueError, OverflowError, OSError):
        # Python's dates end at years 1 and 9999; moved to UTC, the first and last days can
        # fall outside them ("year 0 is out of range").
        raise UsageError(f"{_shown(text)} is out of range: use a date from {FIRST_DATE} to {LAST_DATE}") from None
    if end and len(text) == 10:  # a bare date: the whole day
        stamp += 86400 - 0.001
    return stamp




def _finite_time(number: float, text: str | None = None) -> float:
    """A Unix time as a float; UsageError for one a float cannot hold (1e999, a 400-digit number)."""
    try:
        stamp = float(number)
    except OverflowError:
        stamp = math.inf
    if not math.isfinite(stamp):
        raise UsageError(f"{_shown(number if text is None else text)} is out of range for a Unix time")
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
            conditions.append(Condition("date", "$gte", _argument("since", self.since)))
        if self.until is not None:
            conditions.append(Condition("date", "$lte", _argument("until", self.until, end=True)))
        kind = self.kind
        for key, value in self.where.items():
            if key == "kind":
                kind = _kind(str(value))
                continue
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", key):
                raise UsageError(f"where: {key!r} is not a metadata key")
            try:
                conditions.append(Condition(key, "$eq", typed_value(key, value)))
            except UsageError as exc:
                raise UsageError(f"where: {exc}") from None
        return Filters(tuple(conditions), kind)


def _argument(name: str, raw: Scalar, *, end: bool = False) -> float:
    """`since` or `until` as a Unix time; the UsageError names the argument."""
    try:
        return parse_time(raw, end=end)
    except UsageError as exc:
        raise UsageError(f"{name}: {exc}") from None
