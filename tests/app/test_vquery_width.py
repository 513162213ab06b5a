"""/vquery's excerpts take the width the conversation has: the whole table fits at 80 columns,
and a wider window shows more of each excerpt, cut with "…" (app and line mode)."""

from __future__ import annotations

from typing import Any

import pytest

from ocat.commands import CommandResult
from ocat.repl import render_result
from tests.support.pilot import make_app, memory_ready, send, wait_for_command

NOTE = ("the spare key is under the blue flowerpot by the back door, and the alarm code is written "
        "on the inside of the fuse box lid in the garage; the neighbours at number twelve keep a "
        "second key and know to water the tomatoes on Tuesdays and Fridays while we are away")


def table_lines(table: Any) -> list[str]:
    return ["".join(segment.text for segment in table.render_line(y)) for y in range(table.size.height)]


@pytest.mark.slow  # the app's memory runs the real model
@pytest.mark.anyio
@pytest.mark.parametrize("size", [(80, 24), (120, 30), (160, 50)], ids=["80x24", "120x30", "160x50"])
async def test_vquery_excerpts_fit_the_width_and_end_in_an_ellipsis(size: tuple[int, int]) -> None:
    from ocat.ui.fitted_table import FittedTable

    app = make_app(dummy=True)
    async with app.run_test(size=size) as pilot:
        await memory_ready(app, pilot)
        await send(app, pilot, f"/vadd {NOTE}")
        await wait_for_command(app, pilot)
        await send(app, pilot, '/vquery "where is the spare key" 3')
        await wait_for_command(app, pilot)
        await pilot.pause()
        table = list(app.query(FittedTable))[-1]
        width = size[0]
        # The table lies inside the window and needs no sideways scrolling.
        assert table.region.right <= width and table.virtual_size.width <= table.scrollable_content_region.width
        lines = table_lines(table)
        assert all(len(line.rstrip()) <= table.size.width for line in lines)
        if width < 100:
            # Side by side, the excerpt would get a dozen characters: each hit is stacked, its
            # excerpt on a line of its own, as wide as the table.
            assert table.stacked
            excerpt = str(table.get_row_at(0)[-1]).split("\n")[1]
            assert len(excerpt) >= width - 20, excerpt
        else:
            assert not table.stacked
            excerpt = str(table.get_row_at(0)[-1])
            assert len(excerpt) > width - 80
        assert excerpt.endswith("…") and excerpt[:-1] in " ".join(NOTE.split())
        assert any(excerpt in line for line in lines)  # shown whole, not clipped
        # The table is as wide as its space.
        assert table.virtual_size.width == table.scrollable_content_region.width
        if width >= 120:
            # Narrowed, the table is fitted again: stacked at 80 columns.
            await pilot.resize_terminal(80, 24)
            await pilot.pause()
            await pilot.pause()
            assert table.region.right <= 80 and table.virtual_size.width == table.scrollable_content_region.width
            assert table.stacked


def hit_lines_at_80(monkeypatch: pytest.MonkeyPatch, origin: str) -> list[str]:
    """A /vquery hit from `origin` as the line mode prints it in 80 columns, each line checked to fit."""
    row = ("1", "doc-62b1f658-0", "0.06*", "next to #1 in its thread", origin, "2026-11-26", NOTE)
    result = CommandResult(text="1 result", columns=("#", "id", "score", "why", "from", "date", "excerpt"),
                           rows=[row], fit_column=6)
    monkeypatch.setenv("COLUMNS", "80")
    lines = render_result(result).splitlines()
    assert all(len(line) <= 80 for line in lines)
    return lines


def test_line_mode_stacks_a_row_when_its_excerpt_would_be_too_narrow(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = hit_lines_at_80(monkeypatch, "thread 3f2a9c1e")
    assert lines[-2].startswith("1  doc-62b1f658-0  0.06*  next to #1 in its thread")
    assert lines[-1].startswith("    the spare key is under") and lines[-1].endswith("…") and len(lines[-1]) == 80


def test_line_mode_fits_the_excerpt_to_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    result = CommandResult(text="1 result", columns=("#", "id", "excerpt"), rows=[("1", "abcd1234", NOTE)],
                           fit_column=2)
    for columns in (80, 160):
        monkeypatch.setenv("COLUMNS", str(columns))
        lines = render_result(result).splitlines()
        assert all(len(line) <= columns for line in lines), columns
        assert lines[-1].endswith("…") and len(lines[-1]) == columns
    monkeypatch.setenv("COLUMNS", "400")
    assert render_result(result).splitlines()[-1].endswith(NOTE)  # room for all of it: not cut


@pytest.mark.slow  # the app's memory runs the real model
def test_snapshot_vquery_at_80x24_keeps_every_column_whole(snap_compare: Any) -> None:
    """At 80 columns /vquery's date fell off the end of each hit's line and "from" was cut
    (`thread ecccf2f5…`): now the columns go on as many lines as hold them whole."""
    from ocat.records import DocumentChunk, Exchange

    async def settle(pilot: Any) -> None:
        app = pilot.app
        await memory_ready(app, pilot)
        store = app.session.session_memory.store
        # Fixed ids and times, as a user's store holds them: the picture is the same on every run.
        thread = "ecccf2f5-0c1d-4e5f-9a8b-7c6d5e4f3a2b"
        for seq, (prompt, answer) in enumerate([("where did we hide the spare key?", NOTE),
                                                ("and the alarm code?", "On the fuse box lid in the garage.")]):
            store.add_exchange(Exchange(user_prompt=prompt, assistant_response=answer, thread_id=thread,
                                        session_id="old", exchange_id=f"5b9e41d{seq}-2f6a-4c8e-b1d3-0a9f8e7d6c5b",
                                        timestamp=1_764_000_000.0 + seq * 60))
        store.add_chunks([DocumentChunk("doc-62b1f658c0d4e2a1-0", "The spare key for the shed is in the red tin.",
                                        {"source": "vadd_command", "manual_entry": True,
                                         "date_added": 1_764_086_400.0, "document_id": "62b1f658c0d4e2a1",
                                         "chunk_index": 0, "total_chunks": 1}),
                          DocumentChunk("doc-9d0c7e3b5a1f4e2d-0", "Spare keys: shed, red tin; front door, blue pot.",
                                        {"source": "cli", "source_file": "/home/me/notes/household-keys-and-codes.md",
                                         "date_added": 1_764_086_400.0, "document_id": "9d0c7e3b5a1f4e2d",
                                         "chunk_index": 0, "total_chunks": 1})])
        await send(app, pilot, '/vquery "where is the spare key" 5')
        await wait_for_command(app, pilot)
        await pilot.pause()

    assert snap_compare(make_app(dummy=True), terminal_size=(80, 24), run_before=settle)


def test_line_mode_keeps_every_cell_of_a_stacked_row_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """A file's name as "from" pushed the date off the end of the line, and cut the name."""
    lines = hit_lines_at_80(monkeypatch, "household-keys-and-codes.md")
    assert lines[-3].startswith("1  doc-62b1f658-0  0.06*  next to #1 in its thread  household-keys-and-codes.md")
    assert lines[-2] == "2026-11-26" and lines[-1].startswith("    the spare key is under")
