"""Limits on counts the user types, shared by the command line and the slash commands.

Light on purpose (no Textual, no store): `ocat.cli` and `ocat.commands` both import it, so
`--results 0` and `/vquery "x" 0` are refused by the same rule with the same words.
"""

from __future__ import annotations

import re

# Results per query: `--results N` and `/vquery "QUERY" COUNT`.
MIN_RESULTS = 1
MAX_RESULTS = 1000
# Rows a listing shows: `/threads COUNT` and `/history COUNT`.
MIN_LISTED = 1
MAX_LISTED = 1000
DEFAULT_LISTED = 10

# ASCII digits only: int() would also take "1_000" and other scripts' digits, which no one means.
_WHOLE_NUMBER = re.compile(r"[+-]?[0-9]+")


def whole_number(text: str, lo: int, hi: int) -> int:
    """`text` as a whole number from `lo` to `hi`; ValueError saying what is allowed otherwise.

    The message has no subject, so each caller names what was wrong (`--results: ...`,
    `/threads: COUNT ...`): `must be a whole number from 1 to 1000, not "abc"`.
    """
    cleaned = text.strip()
    if not _WHOLE_NUMBER.fullmatch(cleaned) or not lo <= int(cleaned) <= hi:
        raise ValueError(f'must be a whole number from {lo} to {hi}, not "{text}"')
    return int(cleaned)

# Chroma holds whole numbers as 64-bit integers: a larger one is an "Invalid where clause".
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# The dates every time zone can turn into a timestamp.
FIRST_DATE, LAST_DATE = "0001-01-02", "9999-12-30"

# A thread's title (`/rename TITLE`, and a title in an `--import-memory` file), in characters.
MAX_TITLE_CHARS = 200

# The most chunks one document can have: an imported `total_chunks` or `chunk_index` past it
# is refused, and a stored one past it (another client's metadata) is read as unknown. A 1 GB
# file of one-line text makes about a million chunks at the shipped chunk size.
MAX_DOCUMENT_CHUNKS = 10_000_000


def stored_count(value: object, *, least: int = 0) -> int | None:
    """A chunk count or index read from stored metadata, or None when it is no usable whole
    number (a string, a list, a float, a bool, or past MAX_DOCUMENT_CHUNKS): a store written by
    an older ocat or another Chroma client may hold anything, and reading it must not fail."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if least <= value <= MAX_DOCUMENT_CHUNKS else None
