"""The user's profile, as the wake block reads it: a regular file, bounded, fitted in linear time.

The profile is a Markdown file the user edits (`/profile`); whatever it says reaches the model at
the start of every thread. So it is read with care: only a regular file (a pipe would hang every
turn, `/dev/zero` would fill memory), at most PROFILE_BYTES, as UTF-8 text; comments and an
unedited template never reach the model; and fitting it into the wake budget counts each line's
tokens once. Anything left out is said, in a note the faces show.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

# What a new profile file starts with (/profile): the model reads whatever it then says.
PROFILE_TEMPLATE = (
    "# About me\n\n"
    "<!-- Who you are, what you work on, how you like answers. ocat gives this file to the model\n"
    "at the start of every thread (wake.tokens limits how much). Comments like this one\n"
    "never reach the model. -->\n"
)
# The most of a profile that is read: far more than any wake budget holds.
PROFILE_BYTES = 64 * 1024

_COMMENT = re.compile(r"<!--.*?(-->|\Z)", re.DOTALL)
_HEADING = re.compile(r"#{1,6}(\s.*)?")


@dataclass(frozen=True)
class Profile:
    """The profile's text as the model may read it ("" for none), and what to tell the user about it."""

    text: str
    note: str | None = None


def read_profile(path: Path) -> Profile:
    """The profile at `path`: "" when there is none, or it is not a readable UTF-8 regular file
    (then `note` says why); its first PROFILE_BYTES when longer (`note` says so)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return Profile("")
    except OSError as exc:
        return Profile("", f"the profile {path} cannot be read ({exc.strerror or exc}): left out")
    if not stat.S_ISREG(mode):
        return Profile("", f"the profile {path} is not a regular file (a pipe, a device or a folder): left out")
    try:
        # Non-blocking: were it swapped for a pipe since the check, opening it still returns at once.
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(descriptor, "rb") as handle:
            data = handle.read(PROFILE_BYTES + 1)
    except OSError as exc:
        return Profile("", f"the profile {path} cannot be read ({exc.strerror or exc}): left out")
    cut = len(data) > PROFILE_BYTES
    data = data[:PROFILE_BYTES]
    if b"\x00" in data:
        return Profile("", f"the profile {path} is not text (it holds binary data): left out")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if not (cut and exc.start >= len(data) - 3):  # a character cut by the limit is not an error
            return Profile("", f"the profile {path} is not UTF-8 text (byte {exc.start}): left out")
        text = data[: exc.start].decode("utf-8-sig")
    size = f"{PROFILE_BYTES // 1024} KB"
    note = f"the profile {path} is over {size}: only its first {size} are read" if cut else None
    return Profile(said(text), note)


def said(text: str) -> str:
    """What a profile tells the model: without its comments, and nothing at all when only headings
    are left (the unedited template)."""
    kept = _COMMENT.sub("", text).strip()
    lines = [line.strip() for line in kept.splitlines() if line.strip()]
    return kept if any(not _HEADING.fullmatch(line) for line in lines) else ""


def fit_lines(text: str, budget: int, count: Callable[[str], int]) -> str:
    """The first lines of `text` that fit in `budget` tokens. Each line is counted once (linear in
    the text, however large the budget), then the kept part is counted whole, dropping lines
    from its end while the joined text counts more than the lines did."""
    if budget <= 0:
        return ""
    if count(text) <= budget:
        return text
    kept: list[str] = []
    used = 0
    for line in text.splitlines():
        cost = count(line) + 1  # its newline
        if used + cost > budget:
            break
        kept.append(line)
        used += cost
    while kept and count("\n".join(kept)) > budget:
        kept.pop()
    return "\n".join(kept).strip()
