"""The memory browser screen (ocat.ui.memory_browser): opened with Ctrl+R or /memory, it lists,
searches, filters, previews, opens, deletes, exports and copies what memory holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input, Markdown
from textual.widgets.markdown import MarkdownBlock

from ocat.ui.memory_browser import EntryList, MemoryBrowser
from ocat.ui.screens import ConfirmDialog
from ocat.ui.widgets import UserMessage
from tests.support.pilot import make_app, memory_ready, notices, send, wait_for, wait_for_command

pytestmark = pytest.mark.anyio


def remember(app: Any, thread: str, *pairs: tuple[str, str], start: float = 1_763_000_000.0) -> None:
    """Store exchanges in `thread` as an earlier session would have."""
    from ocat.records import Exchange

    for seq, (prompt, answer) in enumerate(pairs):
        app.session.session_memory.store.add_exchange(Exchange(
            user_prompt=prompt, assistant_response=answer, thread_id=thread, session_id="old-session",
            exchange_id=f"{thread}-{seq}", timestamp=start + seq * 60))


def filled(app: Any) -> None:
    remember(app, "garden-thread", ("plan the vegetable garden", "tomatoes first, then beans"),
             ("when do I sow beans?", "after the last frost, in May"))
    remember(app, "taxes-thread", ("file the taxes before April", "done by Friday"), start=1_762_000_000.0)
    from ocat.operations.add import add_note

    add_note(app.session.session_memory.store, "the spare key is under the blue flowerpot", app.session.settings.chunking,
             source="vadd_command")


async def opened(app: Any, pilot: Any) -> MemoryBrowser:
    """Open the browser with its key and wait for its first listing."""
    await pilot.press("ctrl+r")
    await wait_for(pilot, lambda: isinstance(app.screen, MemoryBrowser), "the browser opens")
    browser = app.screen
    await wait_for(pilot, lambda: browser.entries, "the first listing")
    return browser


async def on_the_list(app: Any, pilot: Any) -> MemoryBrowser:
    """Once memory is ready: fill it, open the browser and move to its list."""
    await memory_ready(app, pilot)
    filled(app)
    browser = await opened(app, pilot)
    browser.query_one(EntryList).focus()
    return browser


def titles(browser: MemoryBrowser) -> list[str]:
    return [e.title for e in browser.entries]


@pytest.mark.slow
async def test_ctrl_r_lists_threads_and_notes_with_a_preview_and_esc_goes_back() -> None:
    app = make_app(dummy=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await memory_ready(app, pilot)
        filled(app)
        browser = await opened(app, pilot)
        assert [e.kind for e in browser.entries] == ["note", "thread", "thread"]
        assert titles(browser)[1:] == ["plan the vegetable garden", "file the taxes before April"]
        assert "3 entries" in str(browser.query_one("#browser-filters").render())
        await wait_for(pilot, lambda: "blue flowerpot" in browser.query_one("#browser-text", Markdown).source,
                       "the preview shows the note")
        browser.query_one(EntryList).focus()
        await pilot.press("down")
        await wait_for(pilot, lambda: "after the last frost" in browser.query_one("#browser-text", Markdown).source,
                       "the preview follows the cursor: the whole thread")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, MemoryBrowser), "Esc goes back to the chat")


@pytest.mark.slow
async def test_typing_searches_and_filters_narrow_the_list() -> None:
    app = make_app(dummy=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await memory_ready(app, pilot)
        filled(app)
        await send(app, pilot, "/memory when to sow beans")
        await wait_for(pilot, lambda: isinstance(app.screen, MemoryBrowser), "/memory opens the browser")
        browser = app.screen
        await wait_for(pilot, lambda: browser.searching and browser.entries, "the search's results")
        assert browser.entries[0].title == "when do I sow beans?" and browser.entries[0].score is not None
        search = browser.query_one("#browser-search", Input)
        search.value = "spare key flowerpot"
        await wait_for(pilot, lambda: browser.entries and browser.entries[0].kind == "note", "search as you type")
        search.value = ""
        await wait_for(pilot, lambda: not browser.searching, "an empty search lists the newest again")
        await pilot.press("f2")  # kind: threads
        await wait_for(pilot, lambda: {e.kind for e in browser.entries} == {"thread"}, "threads only")
        await pilot.press("f4")  # source: chat
        await pilot.press("f4", "f4")  # source: file: no thread comes from a file
        await wait_for(pilot, lambda: not browser.entries, "nothing from files")
        assert "Nothing here yet." in browser.query_one("#browser-text", Markdown).source


@pytest.mark.slow
async def test_f5_keeps_to_this_chats_project() -> None:
    from ocat.records import Exchange

    app = make_app(dummy=True)
    async with app.run_test(size=(100, 30)) as pilot:
        browser = await on_the_list(app, pilot)
        app.session.session_memory.store.add_exchange(Exchange("fix the ferry timetable", "done", "here-thread", "s",
                                                project=app.session.project))
        app.session.session_memory.store.add_exchange(Exchange("train seat map", "done", "there-thread", "s", project="/elsewhere"))
        await pilot.press("f5")  # project: this project
        await wait_for(pilot, lambda: titles(browser) == ["fix the ferry timetable"], "this project's thread only")
        assert "F5 this project" in str(browser.query_one("#browser-filters").render())
        await pilot.press("f5")  # any project again
        await wait_for(pilot, lambda: "train seat map" in titles(browser), "every project")


@pytest.mark.slow
async def test_enter_on_a_thread_continues_it() -> None:
    app = make_app(dummy=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await on_the_list(app, pilot)
        await pilot.press("down", "enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, MemoryBrowser), "the browser closes")
        await wait_for_command(app, pilot)
        assert app.session.thread_id == "garden-thread"
        assert [str(w.render()) for w in app.query(UserMessage)] == [
            "plan the vegetable garden", "when do I sow beans?"]
        assert any(n.startswith("Resumed thread garden-t") for n in notices(app))


@pytest.mark.slow
async def test_marked_entries_are_deleted_together_after_a_confirmation() -> None:
    app = make_app(dummy=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await memory_ready(app, pilot)
        filled(app)
        app.session.resume("garden-thread")  # the thread on screen is one of those deleted
        browser = await opened(app, pilot)
        browser.query_one(EntryList).focus()
        await pilot.press("down", "space", "space")  # mark both threads
        assert len(browser.marked) == 2
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "it asks first")
        assert "2 entries: 2 threads" in app.screen.question
        await pilot.press("n")
        await wait_for(pilot, lambda: app.screen is browser, "no keeps them")
        assert app.session.session_memory.store.count("exchange") == 3
        await pilot.press("d", "y")
        await wait_for(pilot, lambda: [e.kind for e in browser.entries] == ["note"], "both threads are gone")
        assert app.session.session_memory.store.count("exchange") == 0
        assert app.session.thread_id != "garden-thread"  # a new thread starts, as /deletethread does
        await pilot.press("escape")
        await wait_for(pilot, lambda: any("a new thread starts" in n for n in notices(app)), "the chat says so")


@pytest.mark.slow
async def test_export_writes_the_thread_and_copy_takes_the_whole_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    app = make_app(dummy=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await on_the_list(app, pilot)
        await pilot.press("down", "e")
        exported = tmp_path / "ocat-plan-the-vegetable-garden.md"
        await wait_for(pilot, exported.exists, "the thread is written as Markdown")
        assert "after the last frost" in exported.read_text()
        await pilot.press("c")
        await wait_for(pilot, lambda: "tomatoes first" in (app.clipboard or ""), "the thread is copied")
        await pilot.press("up", "e")  # a note is no conversation: it says what to do instead
        await wait_for(pilot, lambda: any("c copies this" in str(n.message) for n in app._notifications),
                       "exporting a note says why not")


async def test_without_memory_the_browser_says_why() -> None:
    app = make_app(dummy=True, **{"vector_store.enabled": False})
    async with app.run_test(size=(80, 24)) as pilot:
        await send(app, pilot, "/memory")
        await wait_for(pilot, lambda: isinstance(app.screen, MemoryBrowser), "the browser opens")
        await wait_for(pilot, lambda: app.screen.query("#browser-empty"), "it says memory is off")
        assert "Memory is off" in str(app.screen.query_one("#browser-empty").render())


@pytest.mark.slow
@pytest.mark.parametrize("size", [(80, 24), (160, 50)], ids=["80x24", "160x50"])
def test_snapshot_memory_browser(snap_compare: Any, size: tuple[int, int], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ocat.memory.ingest.documents.now", lambda: 1_763_050_000.0)  # the note's date, in the picture

    async def settle(pilot: Any) -> None:
        app = pilot.app
        await memory_ready(app, pilot)
        filled(app)
        remember(app, "kitchen-thread", ("we're renovating the kitchen; the contractor quoted $38,000 for cabinets",
                                         "That is high for cabinets alone: ask for an itemised quote."),
                 start=1_763_100_000.0)
        browser = await opened(app, pilot)
        browser.query_one(EntryList).focus()
        await pilot.press("down", "space")  # marks the kitchen thread, moves on to the garden's
        preview = browser.query_one("#browser-text", Markdown)
        # The source is set at once and its blocks are mounted after: wait for the blocks.
        await wait_for(pilot, lambda: any("last frost" in (block.source or "") for block in preview.query(MarkdownBlock)),
                       "the preview shows the highlighted thread")

    assert snap_compare(make_app(dummy=True), terminal_size=size, run_before=settle)
