"""Chunking: worked examples per strategy, then properties over random text and options."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ocat.text.chunking import STRATEGIES, Chunk, ChunkingSettings, chunk_text, content_hash
from ocat.config.loading import shipped_settings
from tests.support.examples import examples

# The shipped chunking settings (config/default.yaml owns the defaults).
DEFAULTS = shipped_settings().chunking


def opts(strategy: str, size: int = 100, overlap: int = 0, ceiling: int | None = None, **kw) -> ChunkingSettings:
    ceiling = size if ceiling is None else ceiling
    return replace(DEFAULTS, strategy=strategy, chunk_size=size, chunk_overlap=overlap, max_chunk_size=ceiling, **kw)


def texts(chunks: list[Chunk]) -> list[str]:
    return [c.text for c in chunks]


def stream(text: str) -> str:
    """The non-whitespace characters of `text`, in order: what must survive chunking."""
    return "".join(text.split())


# --- general -------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("text", ["", "   ", "\n\n\t \n"])
def test_empty_or_blank_text_gives_no_chunks(strategy: str, text: str) -> None:
    assert chunk_text(text, opts(strategy), filename="a.md") == []


@pytest.mark.parametrize(
    "options",
    [
        replace(DEFAULTS, strategy="paragraphs"),
        replace(DEFAULTS, chunk_size=0, chunk_overlap=0),
        replace(DEFAULTS, chunk_size=-5, chunk_overlap=0),
        replace(DEFAULTS, chunk_overlap=-1),
        replace(DEFAULTS, chunk_size=100, chunk_overlap=100),
        replace(DEFAULTS, chunk_size=100, chunk_overlap=150),
        replace(DEFAULTS, chunk_size=2000, max_chunk_size=1500),
    ],
)
def test_invalid_options_raise(options: ChunkingSettings) -> None:
    # Even empty text is refused: a bad setting should surface at once, not on the first big file.
    for text in ("some text", ""):
        with pytest.raises(ValueError):
            chunk_text(text, options)


def test_defaults_are_valid_and_match_the_shipped_config() -> None:
    options = DEFAULTS
    assert (options.strategy, options.chunk_size, options.chunk_overlap, options.max_chunk_size) == (
        "semantic",
        1000,
        100,
        1500,
    )
    assert chunk_text("hello world", options) == [Chunk("hello world", 0)]


def test_content_hash_is_sha256_of_utf8() -> None:
    assert content_hash("héllo") == hashlib.sha256("héllo".encode()).hexdigest()
    assert content_hash("a") != content_hash("b")


# --- truncate ------------------------------------------------------------------------------


def test_truncate_keeps_short_text_whole() -> None:
    assert chunk_text("  short text  ", opts("truncate", 50)) == [Chunk("short text", 0)]


def test_truncate_drops_the_rest_and_cuts_at_a_sentence_end() -> None:
    text = "One two three. Four five six seven. Eight nine ten eleven twelve."
    [chunk] = chunk_text(text, opts("truncate", 40))
    assert chunk.text == "One two three. Four five six seven."


def test_truncate_falls_back_to_a_word_boundary() -> None:
    text = "alpha beta gamma delta epsilon zeta"
    assert texts(chunk_text(text, opts("truncate", 20))) == ["alpha beta gamma"]


def test_truncate_ignores_a_boundary_in_the_first_half() -> None:
    text = "Hi. " + "x" * 50
    assert texts(chunk_text(text, opts("truncate", 20))) == ["Hi. " + "x" * 16]


def test_truncate_without_boundaries_cuts_hard() -> None:
    text = "One two three. Four five six seven. Eight nine ten."
    assert texts(chunk_text(text, opts("truncate", 40, preserve_sentence_boundaries=False))) == [text[:40]]


# --- fixed_size ----------------------------------------------------------------------------


def test_fixed_size_windows_overlap() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(100))
    chunks = texts(chunk_text(text, opts("fixed_size", 30, 10, preserve_sentence_boundaries=False)))
    assert chunks == [text[0:30], text[20:50], text[40:70], text[60:90], text[80:100]]


def test_fixed_size_ends_windows_at_sentences_and_repeats_the_overlap() -> None:
    text = " ".join(f"Sentence number {i} ends here." for i in range(12))
    chunks = texts(chunk_text(text, opts("fixed_size", 100, 20)))
    assert len(chunks) > 1
    assert all(len(c) <= 100 for c in chunks)
    assert all(c.endswith(".") for c in chunks)
    for before, after in zip(chunks, chunks[1:]):
        # The next window repeats the previous one's tail (at most 20 characters), from a word start.
        shared = [before[k:] for k in range(len(before) - 20, len(before)) if after.startswith(before[k:])]
        assert shared and shared[0].strip() and before[len(before) - len(shared[0]) - 1] == " "


def test_fixed_size_covers_everything_once_without_overlap() -> None:
    text = "word " * 200
    chunks = texts(chunk_text(text, opts("fixed_size", 50, 0)))
    assert " ".join(chunks).split() == text.split()


# --- semantic ------------------------------------------------------------------------------


def test_semantic_packs_paragraphs_up_to_chunk_size() -> None:
    paragraphs = [f"Paragraph {i} says something." for i in range(6)]  # 27-28 characters each
    chunks = texts(chunk_text("\n\n".join(paragraphs), opts("semantic", 60, ceiling=100)))
    assert chunks == ["\n\n".join(paragraphs[i : i + 2]) for i in range(0, 6, 2)]


def test_semantic_splits_a_long_paragraph_at_sentences_and_keeps_packing() -> None:
    sentences = [f"This is sentence {i}, quite plain!" for i in range(5)]  # 32 characters each
    text = "Intro.\n\n" + " ".join(sentences)
    chunks = texts(chunk_text(text, opts("semantic", 70, ceiling=100)))
    # Packing is greedy over paragraphs and sentences alike, so the short intro is not left alone.
    assert chunks == ["Intro.\n\n" + sentences[0], " ".join(sentences[1:3]), " ".join(sentences[3:])]


def test_semantic_keeps_a_sentence_between_size_and_ceiling_whole() -> None:
    sentence = "word " * 15 + "end."  # 79 characters
    chunks = texts(chunk_text(sentence + " Next one.", opts("semantic", 50, ceiling=100)))
    assert chunks == [sentence, "Next one."]


def test_semantic_splits_an_overlong_sentence_at_words_then_hard_cuts() -> None:
    words = ["lorem"] * 30 + ["x" * 250] + ["tail."]
    chunks = texts(chunk_text(" ".join(words), opts("semantic", 50, ceiling=80)))
    assert all(len(c) <= 50 for c in chunks)
    assert "x" * 50 in chunks
    assert stream("".join(chunks)) == stream(" ".join(words))


def test_semantic_keeps_line_breaks_inside_a_chunk() -> None:
    text = "line one\nline two\n\nnext paragraph"
    assert texts(chunk_text(text, opts("semantic", 100))) == [text]


# --- hybrid --------------------------------------------------------------------------------


def test_hybrid_caps_at_chunk_size_where_semantic_allows_the_ceiling() -> None:
    sentence = "word " * 15 + "end."  # 79 characters
    hybrid = texts(chunk_text(sentence, opts("hybrid", 50, ceiling=100)))
    assert texts(chunk_text(sentence, opts("semantic", 50, ceiling=100))) == [sentence]
    assert len(hybrid) == 2 and all(len(c) <= 50 for c in hybrid)
    assert " ".join(hybrid) == sentence


def test_hybrid_merges_a_small_fragment_into_a_neighbour() -> None:
    text = "Long paragraph " * 5 + "\n\nTiny."  # 74 + 2 + 5 characters
    assert texts(chunk_text(text, opts("semantic", 75, ceiling=120))) == [text[:74], "Tiny."]
    assert texts(chunk_text(text, opts("hybrid", 75, ceiling=120))) == [text.strip()]


def test_hybrid_merges_into_the_smaller_neighbour() -> None:
    text = "a" * 70 + "\n\n" + "mid" + "\n\n" + "b" * 40
    assert texts(chunk_text(text, opts("hybrid", 72, ceiling=120))) == ["a" * 70, "mid\n\n" + "b" * 40]


def test_hybrid_leaves_a_fragment_when_merging_would_pass_the_ceiling() -> None:
    text = "x" * 80 + "\n\nTiny."
    assert texts(chunk_text(text, opts("hybrid", 80, ceiling=80))) == ["x" * 80, "Tiny."]


# --- markdown ------------------------------------------------------------------------------

DOC = """Preamble text.

## Install

Run the installer.

## Usage
Call it.
"""


def test_markdown_sections_carry_a_filename_and_heading_header() -> None:
    chunks = chunk_text(DOC, opts("markdown", 200), filename="guide.md")
    assert chunks == [
        Chunk("guide.md\n\nPreamble text.", 0, None),
        Chunk("guide.md\n## Install\n\nRun the installer.", 1, "Install"),
        Chunk("guide.md\n## Usage\n\nCall it.", 2, "Usage"),
    ]


def test_markdown_without_filename_has_only_the_heading_line() -> None:
    chunks = chunk_text(DOC, opts("markdown", 200))
    assert texts(chunks) == ["Preamble text.", "## Install\n\nRun the installer.", "## Usage\n\nCall it."]


def test_markdown_ignores_headings_inside_code_fences() -> None:
    text = "## Real\nbefore\n```bash\n## a shell comment\necho hi\n```\nafter\n### Sub stays\n## Next\nend"
    chunks = chunk_text(text, opts("markdown", 300))
    assert [c.section for c in chunks] == ["Real", "Next"]
    assert "## a shell comment" in chunks[0].text and "### Sub stays" in chunks[0].text


def test_markdown_tilde_fence_needs_a_matching_close() -> None:
    text = "~~~~\n```\n## inside\n~~~\n## still inside\n~~~~\n## Out\nx"
    assert [c.section for c in chunk_text(text, opts("markdown", 300))] == [None, "Out"]


def test_markdown_long_section_splits_and_every_piece_has_the_header() -> None:
    body = "\n\n".join(f"Paragraph {i} of the section body." for i in range(10))
    chunks = chunk_text(f"## Big\n{body}", opts("markdown", 100, ceiling=120), filename="f.md")
    assert len(chunks) > 2
    for chunk in chunks:
        assert chunk.section == "Big" and chunk.text.startswith("f.md\n## Big\n\n")
        assert len(chunk.text) <= 100
    assert stream("".join(c.text.removeprefix("f.md\n## Big\n\n") for c in chunks)) == stream(body)


def test_markdown_header_counts_toward_the_ceiling() -> None:
    sentence = "word " * 14 + "last"  # 74 characters: fits max_chunk_size alone, not with a header
    chunks = texts(chunk_text(f"## S\n{sentence}", opts("markdown", 50, ceiling=80), filename="f.md"))
    assert len(chunks) == 2 and all(len(c) <= 80 and c.startswith("f.md\n## S\n\n") for c in chunks)


def test_markdown_shortens_an_absurd_header_not_the_body() -> None:
    heading, filename = "H" * 300, "/very/" + "deep/" * 60 + "notes.md"
    chunks = chunk_text(f"## {heading}\n\n{'body ' * 40}", opts("markdown", 60, ceiling=80), filename=filename)
    assert all(len(c.text) <= 80 for c in chunks)
    assert all(c.section == heading for c in chunks)
    assert all("…" in c.text.split("\n\n")[0] for c in chunks)
    assert all(c.text.startswith("…") and "notes.md" in c.text for c in chunks)
    assert sum(c.text.count("body") for c in chunks) == 40


def test_a_heading_alone_gives_no_chunk() -> None:
    # An empty section, or a title above the first section: said alone to the model, noise.
    assert texts(chunk_text("## Alone\n\n## Two\nx", opts("markdown", 100))) == ["## Two\n\nx"]
    note = "# Bridge project\n\n## Goals\n\nOpen the bridge by May.\n\n## Risks\n### Later\n"
    chunks = chunk_text(note, opts("markdown", 200), filename="notes/project.md")
    assert texts(chunks) == ["notes/project.md\n## Goals\n\nOpen the bridge by May."]
    assert chunk_text("# Bridge project\n", opts("markdown", 200), filename="project.md") == []
    # A heading with text under it, or code under it, stays.
    assert texts(chunk_text("# Title\nsome text", opts("markdown", 200))) == ["# Title\nsome text"]
    assert texts(chunk_text("## Code\n```\n# a comment\n```", opts("markdown", 200))) == [
        "## Code\n\n```\n# a comment\n```"]


# --- properties ----------------------------------------------------------------------------

_letters = st.characters(blacklist_categories=("Cs",), blacklist_characters="#`~").filter(lambda c: not c.isspace())
_word = st.one_of(
    st.text(_letters, min_size=1, max_size=10),
    st.sampled_from(["end.", "wow!", "why?", '"quoted."', "e.g.", "ünïcødé", "日本語の文。", "🙂"]),
    st.integers(30, 700).map(lambda n: "L" * n),  # longer than small chunk sizes: forces hard cuts
)
_space = st.sampled_from([" ", " ", " ", "\n", "\n\n", "\t", "  \n \n", "\r\n", "\u3000", "\u2028", "\n\n\n\n"])
_text = st.lists(st.tuples(_word, _space), max_size=120).map(lambda ps: "".join(w + s for w, s in ps))


@st.composite
def _options(draw: st.DrawFn, strategies: tuple[str, ...] = STRATEGIES, min_size: int = 20) -> ChunkingSettings:
    size = draw(st.integers(min_size, 400))
    return ChunkingSettings(
        strategy=draw(st.sampled_from(strategies)),
        chunk_size=size,
        chunk_overlap=draw(st.integers(0, size - 1)),
        max_chunk_size=draw(st.integers(size, size * 2)),
        preserve_sentence_boundaries=draw(st.booleans()),
    )


@st.composite
def _markdown(draw: st.DrawFn) -> tuple[str, list[str], str]:
    """Markdown-ish lines; the headings a reader would see (those outside code fences) of the
    sections that hold more than headings; and the text of those sections, which chunking keeps.
    Real headings are numbered so consecutive sections never share one."""
    kinds = draw(st.lists(st.sampled_from(["text", "text", "blank", "heading", "fence", "sub"]), max_size=40))
    lines, fence = [], None
    # Each section (the first has no heading) with its lines, and whether any says more than a heading.
    sections: list[tuple[str | None, list[str], bool]] = [(None, [], False)]
    for n, kind in enumerate(kinds):
        if kind == "text":
            lines.append(draw(_text).replace("\n", " ").replace("\u2028", " ").replace("\r", " "))
        elif kind == "heading":
            lines.append(f"## H{n} " + draw(st.text(_letters, max_size=6)))
            if fence is None:
                sections.append((lines[-1][3:].strip(), [], False))
                continue
        elif kind == "fence":
            lines.append(draw(st.sampled_from(["```", "```py", "~~~", "````"])))
            # CommonMark: only a bare run of the same character, at least as long, closes a fence.
            if fence is None:
                fence = lines[-1].rstrip("py")
            elif set(lines[-1]) == {fence[0]} and len(lines[-1]) >= len(fence):
                fence = None
        elif kind == "sub":
            lines.append("### sub " + draw(st.text(_letters, max_size=6)))
        else:
            lines.append("")
        heading, body, says = sections[-1]
        sections[-1] = (heading, [*body, lines[-1]], says or (bool(lines[-1].strip()) and kind != "sub"))
    # A section that holds only headings gives no chunk: it is neither listed nor in the text kept.
    kept = [(heading, body) for heading, body, says in sections if says]
    said = "\n".join(line for heading, body in kept for line in ([f"## {heading}"] if heading else []) + body)
    return "\n".join(lines), [heading for heading, _ in kept if heading is not None], said


def _assert_common(chunks: list[Chunk], options: ChunkingSettings) -> None:
    assert [c.index for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert chunk.text and chunk.text == chunk.text.strip()
        assert len(chunk.text) <= options.max_chunk_size


@settings(max_examples=examples(200), deadline=None)
@given(text=_text, options=_options())
def test_every_strategy_keeps_its_size_and_shape_promises(text: str, options: ChunkingSettings) -> None:
    chunks = chunk_text(text, options, filename="a.md")
    _assert_common(chunks, options)
    assert bool(chunks) == bool(text.strip())
    if options.strategy in ("truncate", "fixed_size"):
        assert all(len(c.text) <= options.chunk_size for c in chunks)


@settings(max_examples=examples(200), deadline=None)
@given(text=_text, options=_options(("semantic", "hybrid")))
def test_semantic_and_hybrid_keep_all_text_in_order_exactly_once(text: str, options: ChunkingSettings) -> None:
    chunks = texts(chunk_text(text, options))
    assert stream("".join(chunks)) == stream(text)
    assert all(c in text for c in chunks)  # slices of the input: line breaks and spacing kept
    if all(len(w) <= options.chunk_size for w in text.split()):
        # No word needed a hard cut, so the word sequence survives unchanged.
        assert " ".join(chunks).split() == text.split()


@settings(max_examples=examples(200), deadline=None)
@given(text=_text, options=_options(("fixed_size",)))
def test_fixed_size_chunks_cover_the_whole_text(text: str, options: ChunkingSettings) -> None:
    chunks = texts(chunk_text(text, options))
    # Place each chunk as far right as it can go while leaving no non-space gap behind it;
    # if every chunk can be placed and the end is reached, the chunks cover the text.
    covered = 0
    for chunk in chunks:
        reach = len(text) - len(text[covered:].lstrip())
        start = text.rfind(chunk, 0, reach + len(chunk))
        assert start != -1, f"{chunk!r} does not continue the text covered so far"
        covered = max(covered, start + len(chunk))
    assert not text[covered:].strip()


@settings(max_examples=examples(200), deadline=None)
@given(text=_text, options=_options(("truncate",)))
def test_truncate_keeps_a_prefix(text: str, options: ChunkingSettings) -> None:
    chunks = texts(chunk_text(text, options))
    if text.strip():
        [chunk] = chunks
        assert text.strip().startswith(chunk) and len(chunk) <= options.chunk_size
        if len(text.strip()) <= options.chunk_size:
            assert chunk == text.strip()


@settings(max_examples=examples(200), deadline=None)
@given(doc=_markdown(), options=_options(("markdown",), min_size=60), filename=st.sampled_from([None, "a.md", "dir/b.md"]))
def test_markdown_keeps_all_text_under_the_right_headers(
    doc: tuple[str, list[str], str], options: ChunkingSettings, filename: str | None
) -> None:
    text, headings, said = doc
    chunks = chunk_text(text, options, filename=filename)
    _assert_common(chunks, options)
    sections = [c.section for c in chunks if c.section is not None]
    assert [s for i, s in enumerate(sections) if i == 0 or s != sections[i - 1]] == headings
    rebuilt, previous = [], object()
    for chunk in chunks:
        lines = ([filename] if filename else []) + ([f"## {chunk.section}"] if chunk.section is not None else [])
        header = "\n".join(lines) + "\n\n" if lines else ""
        if len(header) <= options.max_chunk_size // 2:  # not shortened: it must be there verbatim
            assert chunk.text.startswith(header)
            if chunk.section != previous and chunk.section is not None:
                rebuilt.append(f"## {chunk.section}")  # the heading line, said once per section
            rebuilt.append(chunk.text[len(header) :])
        else:
            rebuilt = None
            break
        previous = chunk.section
    if rebuilt is not None:
        assert stream("".join(rebuilt)) == stream(said)
