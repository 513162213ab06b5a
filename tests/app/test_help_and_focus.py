"""/help shows every command, grouped by purpose, in the window at 120x40 and at 80x24; the
prompt keeps focus: Tab never takes it, typing reaches it wherever focus went, Esc brings it
back, and PageUp/PageDown scroll the conversation from it."""

from __future__ import annotations

from typing import Any

import pytest
from textual.widgets import DataTable

from ocat.commands import commands
from ocat.commands.registry import GROUPS
from ocat.ui.widgets import PromptInput
from tests.support.pilot import make_app, memory_ready, screen_text, send, wait_for, wait_for_command

pytestmark = pytest.mark.anyio

SIZES = [(120, 40), (80, 24)]
SIZE_IDS = ["120x40", "80x24"]


def off_memory() -> Any:
    # The commands' screens need no memory: the tests stay quick.
    return make_app(dummy=True, **{"vector_store.enabled": False})


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
async def test_help_shows_every_command_name_grouped_by_purpose(size: tuple[int, int]) -> None:
    app = off_memory()
    async with app.run_test(size=size) as pilot:
        await memory_ready(app, pilot)
        await send(app, pilot, "/help")
        await wait_for_command(app, pilot)
        shown = screen_text(app)
        missing = [c.name for c in commands() if f"/{c.name}" not in shown]
        assert missing == [], f"not on screen at {size}: {missing}"
        for title in GROUPS.values():
            assert title in shown
        assert "/help NAME explains one" in shown
        assert app.focused is app.query_one(PromptInput)


async def test_help_name_explains_one_command() -> None:
    app = off_memory()
    async with app.run_test(size=(120, 40)) as pilot:
        await memory_ready(app, pilot)
        await send(app, pilot, "/help vquery")
        await wait_for_command(app, pilot)
        shown = screen_text(app)
        assert '/vquery "QUERY" [COUNT]: search memory' in shown and 'Example: /vquery "what did we decide" 5' in shown


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
async def test_help_name_shows_each_argument_whole_at_any_width(size: tuple[int, int]) -> None:
    """At 80 columns the descriptions were cut at the window's edge ("optional, defaul"), behind
    a sideways scrollbar: they wrap now, and the table fits the window."""
    from ocat.commands.registry import REGISTRY
    from ocat.ui.fitted_table import FittedTable

    app = off_memory()
    async with app.run_test(size=size) as pilot:
        await memory_ready(app, pilot)
        for name in ("vquery", "supersede"):
            await send(app, pilot, f"/help {name}")
            await wait_for_command(app, pilot)
            await pilot.pause()
            table = list(app.query(FittedTable))[-1]
            assert table.region.right <= size[0]
            assert table.virtual_size.width <= table.scrollable_content_region.width
            shown = " ".join(" ".join(str(cell).split())
                             for row in range(table.row_count) for cell in table.get_row_at(row))
            for argument in REGISTRY[name].arguments:
                assert " ".join(argument.describe().split()) in shown, argument.describe()


async def test_page_up_scrolls_the_conversation_while_the_prompt_keeps_focus() -> None:
    app = off_memory()
    async with app.run_test(size=(80, 24)) as pilot:
        await memory_ready(app, pilot)
        await send(app, pilot, "/help")
        await wait_for_command(app, pilot)
        for name in ("vquery", "import", "continue"):
            await send(app, pilot, f"/help {name}")
            await wait_for_command(app, pilot)
        assert "/deletethread" not in screen_text(app)  # the overview has scrolled out of sight
        box = app.query_one(PromptInput)
        for _ in range(6):
            await pilot.press("pageup")
        await pilot.pause()
        assert "/deletethread" in screen_text(app)
        assert app.focused is box
        await pilot.press("pagedown", "pagedown", "pagedown", "pagedown", "pagedown", "pagedown", "h", "i")
        await pilot.pause()
        assert box.text == "hi" and app.focused is box


async def test_tab_on_an_empty_prompt_keeps_focus_and_what_is_typed_next_arrives() -> None:
    app = off_memory()
    async with app.run_test(size=(80, 24)) as pilot:
        await memory_ready(app, pilot)
        box = app.query_one(PromptInput)
        await pilot.press("tab")
        await pilot.pause()
        assert app.focused is box
        assert any("Tab completes a command" in str(n.message) for n in app._notifications)
        await pilot.press("shift+tab", "h", "e", "y")
        await pilot.pause()
        assert app.focused is box and box.text == "hey"
        # Tab still completes a command's name.
        box.text = ""
        await pilot.press("/", "v", "s", "t", "tab")
        await pilot.pause()
        assert box.text == "/vstats" and app.focused is box


async def test_focus_moved_by_a_click_comes_back_with_the_next_key_or_esc() -> None:
    app = off_memory()
    async with app.run_test(size=(120, 40)) as pilot:
        await memory_ready(app, pilot)
        await send(app, pilot, "/help")
        await wait_for_command(app, pilot)
        box = app.query_one(PromptInput)
        table = app.query(DataTable).last()
        await pilot.click(table)
        await wait_for(pilot, lambda: app.focused is table, "the click focuses the table")
        await pilot.press("o", "k")
        await pilot.pause()
        assert app.focused is box and box.text == "ok"
        await pilot.click(table)
        await wait_for(pilot, lambda: app.focused is table, "the click focuses the table")
        await pilot.press("escape")
        await pilot.pause()
        assert app.focused is box and box.text == "ok"


@pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)
def test_snapshot_help(snap_compare: Any, size: tuple[int, int]) -> None:
    async def settle(pilot: Any) -> None:
        await memory_ready(pilot.app, pilot)
        await send(pilot.app, pilot, "/help")
        await wait_for_command(pilot.app, pilot)

    assert snap_compare(off_memory(), terminal_size=size, run_before=settle)
