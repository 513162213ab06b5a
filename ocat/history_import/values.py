"""Turning loosely typed export values into the text and times ocat can store."""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from typing import Any

from ocat.history_import.model import ConversationProblem

# JSON's "\ud800" escapes decode to lone surrogates: no character at all, and the embedder,
# Chroma and SQLite refuse them. A valid pair has already been joined by the decoder, so any
# surrogate left in a decoded string stands alone.
_SURROGATE = re.compile("[\ud800-\udfff]")

# The store accepts dates between the years 1 and 9999; anything outside is no date.
_LATEST = datetime(9999, 12, 31, tzinfo=timezone.utc).timestamp()
_EARLIEST = datetime(1, 1, 2, tzinfo=timezone.utc).timestamp()


def text(value: Any) -> str:
    """`value` if it is a string (lone surrogates replaced by U+FFFD), else ""."""
    if not isinstance(value, str):
        return ""
    # search first: a 10 MB message without surrogates is returned as is, not copied.
    return _SURROGATE.sub("\ufffd", value) if _SURROGATE.search(value) else value


def ident(value: Any) -> str:
    """An id as text: strings as they are, integers written out, anything else ""."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return text(value)


def epoch(value: Any) -> float | None:
    """Epoch seconds from a number, or None when it is missing or no plausible date."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    seconds = float(value)
    if not math.isfinite(seconds) or not _EARLIEST <= seconds <= _LATEST:
        return None
    return seconds


def iso_epoch(value: Any) -> float | None:
    """Epoch seconds from an ISO 8601 string ("2024-03-05T10:00:00.123Z"); a time without a zone
    is taken as UTC, as both Claude and llm write UTC. None when missing or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        return epoch(moment.timestamp())
    except (OverflowError, OSError, ValueError):
        return None


def not_an_object(source: str, number: int) -> ConversationProblem:
    """The problem of an export's item that is not a conversation at all."""
    return ConversationProblem(source, "", "", f"conversation {number} is not a JSON object")
