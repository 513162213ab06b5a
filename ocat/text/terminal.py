"""Making untrusted text safe to print on a terminal, or to copy; dates that cannot crash.

Stored memories, documents and model answers can hold anything, including escape
sequences that recolour the terminal, move the cursor, set the window title or hide text.
`printable` shows such characters visibly instead of letting the terminal act on them.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Callable, Sequence

# C0 controls except tab and newline, DEL, C1 controls (0x9b is a one-byte CSI), and the
# Unicode bidirectional overrides and isolates that can make text read differently from
# what it is ("Trojan Source").
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with control characters shown as escapes (ESC as `\\x1b`); newlines and tabs kept,
    and Windows line ends (CR LF) printed as plain newlines.

    Use it on anything from memory, a document or a model before it goes to a terminal as
    text. JSON output needs nothing more: JSON escapes control characters itself.
    """
    # A lone carriage return can overwrite a line on screen; a Windows line end is just a line end.
    return _UNPRINTABLE.sub(_escape, text.replace("\r\n", "\n"))


def unprintable_escaped(json_text: str) -> str:
    """JSON text with the characters `printable` shows as escapes written as JSON `\\u` escapes:
    the same JSON value, but one that cannot drive a terminal it is printed on."""
    return _UNPRINTABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", json_text)


def without_controls(text: str) -> str:
    """`text` with the terminal control characters removed (newlines and tabs kept), for the
    clipboard: a pasted `ESC[201~` would otherwise end a shell's bracketed paste early and run
    what follows it."""
    return _UNPRINTABLE.sub("", text.replace("\r\n", "\n"))


def clean_title(text: str) -> str:
    """A thread title as ocat stores it: terminal controls, DEL, C1 and bidirectional controls
    removed, line breaks and runs of whitespace as one space, no space at either end. The one
    rule for every way a title comes in (/rename, an import), so an export always imports."""
    return " ".join(_UNPRINTABLE.sub(" ", text).split())


def local_time(timestamp: object, fmt: str = "%Y-%m-%d %H:%M", missing: str = "-") -> str:
    """A Unix time as a local date, or `missing` when there is none or it is no date at all.

    Stored metadata can hold anything (an import, another client): NaN, 1e300 or a string
    must show as `missing`, never raise (OverflowError, OSError, ValueError) while a screen draws.
    """
    if isinstance(timestamp, bool) or not isinstance(timestamp, (int, float)) or not timestamp:
        return missing
    try:
        # NaN raises ValueError; infinity, 1e300 and a 400-digit integer raise OverflowError
        # (math.isfinite itself overflows on such an integer, so no test comes first).
        return datetime.fromtimestamp(timestamp).strftime(fmt)
    except (OverflowError, OSError, ValueError):
        return missing


def shorten(text: str, width: int) -> str:
    """`text` cut to `width` characters, ending in "…" when it was cut."""
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def count_of(count: int, one: str, many: str | None = None) -> str:
    """'1 memory', '2 memories', '0 memories': a count with its noun (`many` defaults to one + 's')."""
    return f"{count} {one if count == 1 else (many or one + 's')}"


# How much further than its own indent a wrapped line's continuations are indented.
HANG = 2


def hanging(text: str, width: int, measure: Callable[[str], int] = len) -> str:
    """`text` with each indented line that is wider than `width` columns (as `measure` counts
    them: wide characters take two on a terminal) wrapped, its continuations indented HANG
    further, so a list such as `/tools`' stays indented instead of running back to column 1.
    Lines without an indent are left to the terminal's own wrapping. A word longer than the
    room is cut where the room ends; nothing is dropped."""
    return "\n".join(wrapped for line in text.split("\n") for wrapped in _hang(line, width, measure))


def _hang(line: str, width: int, measure: Callable[[str], int]) -> list[str]:
    body = line.lstrip(" ")
    indent = len(line) - len(body)
    if not indent or not body or measure(line) <= width:
        return [line]
    more = " " * min(indent + HANG, max(0, width // 2))  # a narrow screen keeps room for words
    out: list[str] = []
    current = line[:indent]
    for word in body.split(" "):
        joined = current + word if not current.strip() else f"{current} {word}"
        if measure(joined) <= width:
            current = joined
            continue
        if current.strip():
            out.append(current)
            current = more
        while measure(current + word) > width:  # longer than the room: cut where it ends
            cut = max(1, _fitting(word, width - measure(current), measure))
            out.append(current + word[:cut])
            word, current = word[cut:], more
        current += word
    out.append(current)
    return out


def _fitting(word: str, room: int, measure: Callable[[str], int]) -> int:
    """How many of `word`'s first characters fit in `room` columns."""
    n = 0
    while n < len(word) and measure(word[: n + 1]) <= room:
        n += 1
    return n


def packed_columns(columns: Sequence[int], widths: Sequence[int], room: int, gap: int = 2) -> list[list[int]]:
    """The columns in order, a line at a time, as many on a line as fit `room` side by side,
    `gap` apart: a table's row stacked in a narrow window keeps every cell whole (at 80 columns
    /vquery's date fell off the end of one line, and "from" was cut)."""
    lines: list[list[int]] = []
    used = 0
    for column in columns:
        if lines and used + gap + widths[column] <= room:
            lines[-1].append(column)
            used += gap + widths[column]
        else:
            lines.append([column])
            used = widths[column]
    return lines
