"""Splitting documents into chunks for the memory store: five strategies (STRATEGIES), pure
functions, and the one chunking type (`ChunkingSettings`, the config's `chunking` section)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

# A sentence ends at . ! or ? (plus any closing quotes or brackets) when whitespace follows.
_SENTENCE_END = re.compile(r"[.!?]['\"’”)\]]*(?=\s)")
# A blank line (possibly holding spaces) separates paragraphs; runs of them count as one.
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")
_WORD = re.compile(r"\S+")
# Level-2 ATX heading at column 0; `###` does not match because a space or tab must follow `##`.
_HEADING = re.compile(r"##[ \t]+(?=\S)")
# Any ATX heading line (`# Title`, `### Sub`), for telling a section that holds nothing else.
_ANY_HEADING = re.compile(r" {0,3}#{1,6}(?:[ \t]|$)")
# CommonMark fences: up to three spaces of indent, then three or more backticks or tildes.
_FENCE_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})")
_FENCE_CLOSE = re.compile(r" {0,3}(`{3,}|~{3,})\s*$")

Span = tuple[int, int]

# The chunking strategies (each is written below).
STRATEGIES: tuple[str, ...] = ("truncate", "fixed_size", "semantic", "hybrid", "markdown")


def _setting(doc: str, **checks: Any) -> Any:
    """A field of the config's `chunking` section: its one-line doc and the checks
    `ocat.config.keys` applies (as `ocat.config.settings` writes its own fields)."""
    return field(metadata={"doc": doc, "path": False, **checks})


@dataclass(frozen=True)
class ChunkingSettings:
    """How imported documents are split before they are embedded; sizes are in characters.
    The one chunking type: `chunk_text` takes it (and checks it: a script may build one by hand)."""

    strategy: str = _setting("How text is split.", choices=STRATEGIES)
    chunk_size: int = _setting("Target chunk length in characters.", lo=1)
    chunk_overlap: int = _setting("Characters shared by neighbouring chunks; less than chunk_size.", lo=0)
    max_chunk_size: int = _setting("Longest a chunk may be, in characters.", lo=1)
    preserve_sentence_boundaries: bool = _setting("Prefer to cut between sentences rather than inside one.")


@dataclass(frozen=True)
class Chunk:
    """One piece of a document, in document order."""

    text: str
    index: int  # 0-based position in the document
    section: str | None = None  # markdown only: the `## ` heading the chunk falls under


def content_hash(text: str) -> str:
    """The sha256 hex digest of the UTF-8 encoding of `text`."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chunk_text(text: str, options: ChunkingSettings, *, filename: str | None = None) -> list[Chunk]:
    """Split `text` into chunks per `options.strategy`.

    Every strategy but `truncate` keeps all of the text and never makes a chunk longer than
    `options.max_chunk_size`. `filename` is only used by `markdown`, in each chunk's header.
    Raises ValueError for an unknown strategy or inconsistent sizes.
    """
    _validate(options)
    if not text.strip():
        return []
    if options.strategy == "truncate":
        return [Chunk(_truncate(text, options), 0)]
    if options.strategy == "fixed_size":
        texts = _fixed_size(text, options)
    elif options.strategy == "semantic":
        spans = _pack(_units(text, 0, len(text), options.chunk_size, options.max_chunk_size), options.chunk_size)
        texts = [text[s:e] for s, e in spans]
    elif options.strategy == "hybrid":
        texts = [text[s:e] for s, e in _hybrid(text, options)]
    else:
        return [Chunk(body, i, section) for i, (section, body) in enumerate(_markdown(text, options, filename))]
    return [Chunk(piece, i) for i, piece in enumerate(texts)]


def _validate(options: ChunkingSettings) -> None:
    if options.strategy not in STRATEGIES:
        raise ValueError(f"unknown chunking strategy {options.strategy!r}; expected one of {', '.join(STRATEGIES)}")
    if options.chunk_size <= 0:
        raise ValueError(f"chunk_size must be positive, got {options.chunk_size}")
    if options.chunk_overlap < 0:
        raise ValueError(f"chunk_overlap must be 0 or more, got {options.chunk_overlap}")
    if options.chunk_overlap >= options.chunk_size:
        raise ValueError(
            f"chunk_overlap must be less than chunk_size ({options.chunk_size}), got {options.chunk_overlap}"
        )
    if options.max_chunk_size < options.chunk_size:
        raise ValueError(
            f"max_chunk_size must be at least chunk_size ({options.chunk_size}), got {options.max_chunk_size}"
        )


# --- truncate and fixed_size: windows over the raw text -------------------------------------


def _boundary(text: str, start: int, end: int, lowest: int) -> int | None:
    """Where to end a window `text[start:end]` early: the last sentence end, else the last
    whitespace, at or after `lowest`; None when there is neither."""
    # endpos end+1 lets the lookahead see the character just past the window, so a sentence
    # that ends exactly at the window's edge still counts.
    last = None
    for match in _SENTENCE_END.finditer(text, start, min(end + 1, len(text))):
        if match.end() >= lowest:
            last = match.end()
    if last is not None:
        return last
    for i in range(min(end, len(text) - 1), lowest - 1, -1):
        if text[i].isspace():
            return i
    return None


def _truncate(text: str, options: ChunkingSettings) -> str:
    """The start of the text, at most chunk_size long; the rest is dropped."""
    body = text.strip()
    size = options.chunk_size
    if len(body) <= size:
        return body
    end = size
    if options.preserve_sentence_boundaries:
        # Only cut early when it keeps more than half the budget; otherwise a hard cut says more.
        cut = _boundary(body, 0, size, size // 2 + 1)
        if cut is not None:
            end = cut
    return body[:end].rstrip()


def _fixed_size(text: str, options: ChunkingSettings) -> list[str]:
    """Windows of chunk_size, each starting chunk_overlap before the previous one ended."""
    body = text.rstrip()
    size, overlap = options.chunk_size, options.chunk_overlap
    n = len(body)
    pos = _skip_space(body, 0)
    pieces = []
    while pos < n:
        end = min(pos + size, n)
        if end < n and options.preserve_sentence_boundaries:
            # Keep at least half a window, and more than the overlap so the next window still
            # starts after this one (forward progress without shrinking the overlap).
            lowest = pos + max((size + 1) // 2, overlap + 1)
            cut = _boundary(body, pos, end, lowest)
            if cut is not None:
                end = cut
        pieces.append(body[pos:end].strip())
        if end >= n:
            break
        nxt = end - overlap
        if options.preserve_sentence_boundaries:
            # Start the overlap on a whole word rather than in the middle of one.
            while nxt < end and not body[nxt - 1].isspace() and not body[nxt].isspace():
                nxt += 1
        pos = _skip_space(body, nxt)
    return pieces


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


# --- semantic and hybrid: spans of the original text, packed greedily ------------------------


def _trim(text: str, start: int, end: int) -> Span | None:
    """`(start, end)` without surrounding whitespace, or None if nothing else is left."""
    start = _skip_space(text, start)
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def _split(text: str, start: int, end: int, cuts: list[int]) -> list[Span]:
    """The trimmed, non-empty spans between successive cut positions."""
    spans = []
    for a, b in zip([start, *cuts], [*cuts, end]):
        span = _trim(text, a, b)
        if span:
            spans.append(span)
    return spans


def _units(text: str, start: int, end: int, target: int, ceiling: int) -> list[Span]:
    """The smallest pieces packing works with: whole paragraphs when they fit `target`, else
    their sentences when those fit `ceiling`, else words, and overlong words cut to `target`."""
    units: list[Span] = []
    breaks = [cut for m in _PARAGRAPH_BREAK.finditer(text, start, end) for cut in (m.start(), m.end())]
    # Paragraph breaks come in (start, end) pairs; _split trims the empty span between each pair.
    for ps, pe in _split(text, start, end, breaks):
        if pe - ps <= target:
            units.append((ps, pe))
            continue
        sentence_ends = [m.end() for m in _SENTENCE_END.finditer(text, ps, pe)]
        for ss, se in _split(text, ps, pe, sentence_ends):
            if se - ss <= ceiling:
                units.append((ss, se))
                continue
            for m in _WORD.finditer(text, ss, se):
                # A word with no whitespace to cut at is cut blindly: the ceiling is a promise.
                units.extend((i, min(i + target, m.end())) for i in range(m.start(), m.end(), target))
    return units


def _pack(units: list[Span], limit: int) -> list[Span]:
    """Join consecutive units while the joined span (gaps included) stays within `limit`.
    A unit already longer than `limit` stays on its own."""
    packed: list[Span] = []
    for s, e in units:
        if packed and e - packed[-1][0] <= limit:
            packed[-1] = (packed[-1][0], e)
        else:
            packed.append((s, e))
    return packed


def _hybrid(text: str, options: ChunkingSettings) -> list[Span]:
    """Semantic spans capped at chunk_size, then fragments under a quarter of it merged
    into a neighbour while the result stays within max_chunk_size."""
    size, ceiling = options.chunk_size, options.max_chunk_size
    # Splitting honours chunk_size itself, so only the merging below may go past it.
    spans = _pack(_units(text, 0, len(text), size, size), size)
    i = 0
    while i < len(spans):
        s, e = spans[i]
        if 4 * (e - s) < size:
            # Merge a fragment into whichever neighbour gives the shorter result, so it keeps
            # its context without producing an outsized chunk.
            candidates = []
            if i > 0:
                candidates.append((e - spans[i - 1][0], i - 1))
            if i + 1 < len(spans):
                candidates.append((spans[i + 1][1] - s, i))
            fits = [o for o in candidates if o[0] <= ceiling]
            if fits:
                _, j = min(fits)
                spans[j : j + 2] = [(spans[j][0], spans[j + 1][1])]
                i = j  # The merged chunk may still be small: look at it again.
                continue
        i += 1
    return spans


# --- markdown: level-2 sections, each piece led by a context header --------------------------


def _sections(text: str) -> list[tuple[str | None, int, int]]:
    """`(heading, body_start, body_end)` per `## ` section; the part before the first heading
    has heading None. Headings inside fenced code blocks are code, not structure."""
    sections: list[tuple[str | None, int, int]] = []
    heading: str | None = None
    body_start = 0
    fence: str | None = None  # The opening run of the fence we are inside, if any.
    pos = 0
    for line in text.split("\n"):
        line_start, pos = pos, pos + len(line) + 1
        if fence is not None:
            close = _FENCE_CLOSE.match(line)
            if close and close.group(1)[0] == fence[0] and len(close.group(1)) >= len(fence):
                fence = None
            continue
        opening = _FENCE_OPEN.match(line)
        if opening:
            fence = opening.group(1)
            continue
        match = _HEADING.match(line)
        if match:
            sections.append((heading, body_start, line_start))
            heading, body_start = line[match.end() :].strip(), min(pos, len(text))
    sections.append((heading, body_start, len(text)))
    return sections


def _header(filename: str | None, heading: str | None, limit: int) -> str:
    """`"{filename}\\n## {heading}\\n\\n"` (either line only when present), shortened with "…"
    to at most `limit` characters; the body is never shortened, so the header gives way."""
    name = " ".join((filename or "").split())  # A filename is one line, whatever it holds.
    title = heading or ""

    def render(name: str, title: str) -> str:
        lines = ([name] if name else []) + ([f"## {title}"] if title else [])
        return "\n".join(lines) + "\n\n" if lines else ""

    header = render(name, title)
    if len(header) <= limit:
        return header
    budget = limit - (len(header) - len(name) - len(title))
    if budget <= 0:
        return ""
    # The heading says more about the piece than the file name does, so it gets first call.
    title_len = min(len(title), budget - min(len(name), budget // 2))
    name_len = min(len(name), budget - title_len)
    if title_len < len(title):
        title = title[: title_len - 1] + "…" if title_len > 1 else ""
    if name_len < len(name):
        # The end of a path (the file's own name) is the part worth keeping.
        name = "…" + name[len(name) - name_len + 1 :] if name_len > 1 else ""
    return render(name, title)


def _markdown(text: str, options: ChunkingSettings, filename: str | None) -> list[tuple[str | None, str]]:
    """`(heading, chunk text)` pairs: each section split semantically, each piece headed."""
    pieces: list[tuple[str | None, str]] = []
    for heading, start, end in _sections(text):
        if _only_headings(text[start:end]):
            # A heading alone (a title above the first section, an empty section) says nothing
            # a search can use, and given to the model it is noise: no chunk of its own.
            continue
        # Half the ceiling at most, so a header can never crowd out the text it introduces.
        header = _header(filename, heading, options.max_chunk_size // 2)
        ceiling = options.max_chunk_size - len(header)
        target = min(ceiling, max(options.chunk_size - len(header), options.chunk_size // 4, 1))
        spans = _pack(_units(text, start, end, target, ceiling), target)
        for s, e in spans:
            pieces.append((heading, (header + text[s:e]).strip()))
    return pieces


def _only_headings(body: str) -> bool:
    """Whether a section's body holds nothing but heading lines (or nothing). It holds no code
    fence either: a section starts only at a heading outside fences, so its headings are real."""
    return all(_ANY_HEADING.match(line) for line in body.splitlines() if line.strip())
