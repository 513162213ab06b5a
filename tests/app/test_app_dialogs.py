"""The chat app's dialogs and keys: the thread picker, delete confirmation, command completion,
remapped bindings and copying answers and code blocks."""

from __future__ import annotations

from typing import Any

import pytest
from textual.widgets import OptionList

from ocat.ui.screens import ChoicePicker, ConfirmDialog
from ocat.ui.answer import AssistantMessage, last_code_block
from ocat.ui.memory_view import MemoryState
from ocat.ui.widgets import CommandSuggestions, NoticeMessage, PromptInput, UserMessage
from tests.support.pilot import make_app, memory_ready, send, wait_for, wait_for_command

pytestmark = pytest.mark.anyio


def remember(app: Any, thread: str, *pairs: tuple[str, str]) -> None:
    """Store exchanges in `thread` as an earlier session would have."""
    from ocat.records import Exchange

    for seq, (prompt, answer) in enumerate(pairs):
        app.session.session_memory.store.add_exchange(Exchange(
            user_prompt=prompt, assistant_response=answer, thread_id=thread, session_id="old-session",
            exchange_id=f"{thread}-{seq}", timestamp=1700000000.0 + seq * 60 + len(thread)))


@pytest.mark.slow
async def test_continue_without_an_id_picks_a_thread_from_a_list() -> None:
    app = make_app(dummy=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        remember(app, "garden-thread", ("plan the garden", "tomatoes first"), ("and then?", "beans"))
        remember(app, "taxes-thread-x", ("file the taxes\nbefore April", "done by Friday"))
        await send(app, pilot, "/continue")
        await wait_for(pilot, lambda: isinstance(app.screen, ChoicePicker), "the picker opens")
        options = app.screen.query_one(OptionList)
        labels = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert len(labels) == 2
        assert any("2 exchanges" in label and "plan the garden" in label for label in labels)
        # A multi-line first prompt is shown by its first line only.
        assert any("file the taxes" in label and "April" not in label for label in labels)
        garden = next(i for i, label in enumerate(labels) if "garden" in label)
        options.highlighted = garden
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.session.thread_id == "garden-thread", "the thread is resumed")
        await wait_for(pilot, lambda: len(app.query(UserMessage)) == 2, "the thread is shown")
        assert [str(w.render()) for w in app.query(UserMessage)] == ["plan the garden", "and then?"]
        assert app.session.continuation_seq == 1  # both stored exchanges were continuation 0


@pytest.mark.slow
async def test_escape_closes_the_picker_and_changes_nothing() -> None:
    app = make_app(dummy=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        remember(app, "garden-thread", ("plan the garden", "tomatoes first"))
        thread = app.session.thread_id
        await send(app, pilot, "/continue")
        await wait_for(pilot, lambda: isinstance(app.screen, ChoicePicker), "the picker opens")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ChoicePicker), "the picker closes")
        assert app.session.thread_id == thread


@pytest.mark.slow
async def test_delete_asks_first_and_no_keeps_the_memory() -> None:
    app = make_app(dummy=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        remember(app, "garden-thread", ("plan the garden", "tomatoes first"))
        store = app.session.session_memory.store
        await send(app, pilot, "/vdelete garden-thread-0")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the dialog opens")
        assert "plan the garden" in app.screen.question
        shown = len(app.query(NoticeMessage))
        await pilot.press("enter")  # No has the focus: Enter alone never deletes
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmDialog), "the dialog closes")
        await wait_for(pilot, lambda: len(app.query(NoticeMessage)) > shown, "the answer is acknowledged")
        await pilot.pause()
        assert store.count("exchange") == 1
        assert "Nothing was deleted" in str(list(app.query(NoticeMessage))[-1].render())
        await send(app, pilot, "/vdelete garden-thread-0")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the dialog opens again")
        await pilot.press("y")
        await wait_for(pilot, lambda: store.count("exchange") == 0, "the memory is deleted")
        await wait_for(pilot, lambda: "Deleted the exchange" in str(list(app.query(NoticeMessage))[-1].render()),
                       "the deletion is reported")


@pytest.mark.slow
async def test_typing_a_command_lists_matches_and_tab_completes() -> None:
    app = make_app(dummy=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        suggestions = app.query_one(CommandSuggestions)
        prompt = app.query_one(PromptInput)
        assert not suggestions.display
        await pilot.press("/", "v")
        assert suggestions.display
        names = [suggestions.get_option_at_index(i).id for i in range(suggestions.option_count)]
        assert names == ["vadd", "vdelete", "vdoc", "vget", "vquery", "vstats"]
        assert "search memory" in str(suggestions.get_option_at_index(4).prompt)
        await pilot.press("q")
        assert [suggestions.get_option_at_index(i).id for i in range(suggestions.option_count)] == ["vquery"]
        await pilot.press("tab")
        assert prompt.text == "/vquery " and not suggestions.display
        # Up/Down choose among the matches; Enter on a partial name completes instead of sending.
        prompt.text = ""
        await pilot.press("/", "t", "h")
        await pilot.press("down")
        await pilot.press("enter")
        assert prompt.text == "/threads "


@pytest.mark.slow
async def test_enter_on_a_whole_command_name_runs_it_and_escape_hides_the_list() -> None:
    app = make_app(dummy=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        suggestions = app.query_one(CommandSuggestions)
        await pilot.press("/", "h", "e")
        assert suggestions.display
        await pilot.press("escape")
        assert not suggestions.display
        await pilot.press("l", "p")
        await pilot.press("enter")
        await wait_for_command(app, pilot)
        assert app.query_one(PromptInput).text == ""
        assert "Commands" in str(list(app.query(NoticeMessage))[-1].render())


@pytest.mark.slow
async def test_copy_the_last_code_block_with_a_remapped_key_and_by_clicking_it(llm_server: Any) -> None:
    llm_server.reply = "Try this:\n\n```python\nprint('one')\n```\n\nor this:\n\n```sh\necho two\n```\n"
    app = make_app(llm_server, **{"keys.copy_code": "f5"})
    async with app.run_test(size=(100, 40)) as pilot:
        await memory_ready(app, pilot)
        await send(app, pilot, "show me code")
        await pilot.press("ctrl+b")  # remapped away: does nothing now
        assert app.clipboard == ""
        await pilot.press("f5")
        assert app.clipboard == "echo two"
        from textual.widgets.markdown import MarkdownFence

        first_fence = app.query_one(AssistantMessage).query(MarkdownFence).first()
        await pilot.click(first_fence)
        await pilot.pause()
        assert app.clipboard == "print('one')"
        await pilot.press("ctrl+o")
        assert app.clipboard == llm_server.reply


def test_last_code_block_finds_fenced_and_indented_code() -> None:
    assert last_code_block("no code here") is None
    assert last_code_block("```\na\n```\ntext\n\n    b = 1\n") == "b = 1"
    assert last_code_block("~~~js\nlet x\n~~~") == "let x"


@pytest.mark.slow
async def test_ctrl_d_deletes_in_a_prompt_and_quits_on_an_empty_one() -> None:
    app = make_app(dummy=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        prompt = app.query_one(PromptInput)
        prompt.text = "ab"
        prompt.move_cursor((0, 0))
        await pilot.press("ctrl+d")
        assert prompt.text == "b" and app.is_running
        prompt.text = ""
        await pilot.press("ctrl+d")
        await pilot.pause()
    assert app.return_code == 0


# ---- how they look ------------------------------------------------------------------

@pytest.mark.slow
def test_snapshot_thread_picker(snap_compare: Any) -> None:
    async def settle(pilot: Any) -> None:
        app = pilot.app
        await memory_ready(app, pilot)
        remember(app, "garden-thread", ("plan the garden", "tomatoes first"), ("and then?", "beans"))
        remember(app, "taxes-thread-x", ("file the taxes\nbefore April", "done by Friday"))
        await send(app, pilot, "/continue")
        await wait_for(pilot, lambda: isinstance(app.screen, ChoicePicker), "the picker opens")
        await pilot.pause()

    assert snap_compare(make_app(dummy=True), terminal_size=(100, 24), run_before=settle)


@pytest.mark.slow
def test_snapshot_command_completion(snap_compare: Any) -> None:
    async def settle(pilot: Any) -> None:
        await memory_ready(pilot.app, pilot)
        await pilot.press("/", "v")
        suggestions = pilot.app.query_one(CommandSuggestions)
        await wait_for(pilot, lambda: suggestions.display, "the matches are listed")
        await pilot.pause()

    assert snap_compare(make_app(dummy=True), terminal_size=(100, 24), run_before=settle)


@pytest.mark.slow
def test_snapshot_delete_confirmation(snap_compare: Any) -> None:
    async def settle(pilot: Any) -> None:
        app = pilot.app
        await memory_ready(app, pilot)
        remember(app, "garden-thread", ("plan the garden", "tomatoes first"))
        await send(app, pilot, "/vdelete garden-thread-0")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the dialog opens")
        await pilot.pause()

    assert snap_compare(make_app(dummy=True), terminal_size=(100, 24), run_before=settle)


@pytest.mark.parametrize("command", ['/vquery "garden plans"', "/vstats"], ids=["vquery", "vstats"])
@pytest.mark.slow
def test_snapshot_memory_commands(snap_compare: Any, command: str, model_in_chroma_cache: Any) -> None:
    async def settle(pilot: Any) -> None:
        app = pilot.app
        await memory_ready(app, pilot)
        remember(app, "garden-thread", ("plan the garden", "tomatoes first"), ("and then?", "beans"))
        await send(app, pilot, command)
        await wait_for(pilot, lambda: app.query(".command-result"), "the result is shown")
        await wait_for_command(app, pilot)

    assert snap_compare(make_app(dummy=True), terminal_size=(110, 30), run_before=settle)


def test_snapshot_provider_error(snap_compare: Any, llm_server: Any) -> None:
    llm_server.status = 401

    async def settle(pilot: Any) -> None:
        app = pilot.app
        app.query_one(PromptInput).cursor_blink = False
        await memory_ready(app, pilot)
        await send(app, pilot, "hello?")
        await wait_for(pilot, lambda: app.query(NoticeMessage), "the error is shown")
        await pilot.pause()

    assert snap_compare(make_app(llm_server, **{"vector_store.enabled": False}), terminal_size=(100, 24),
                        run_before=settle)


async def test_missing_credentials_are_reported_in_the_chat_which_stays_open(monkeypatch: Any) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    app = make_app(**{"llm.model": "gpt-4o-mini", "vector_store.enabled": False})
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.query(NoticeMessage), "the notice")
        notice = str(app.query_one(NoticeMessage).render())
        assert "OPENAI_API_KEY" in notice and "--dummy-mode" in notice
        await send(app, pilot, "/help")
        assert app.is_running


@pytest.mark.slow
async def test_a_store_that_fails_mid_chat_turns_memory_off_and_the_chat_goes_on(monkeypatch: Any) -> None:
    from ocat.errors import StoreError

    app = make_app(dummy=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        remember(app, "garden-thread", ("are you still there?", "yes"))  # an empty store is never searched

        def broken(*args: Any, **kwargs: Any) -> Any:
            raise StoreError("cannot read the memory store: disk I/O error")

        # On the class: the chat gives a failing store up and opens it again at once, and the
        # store it opens again must fail the same way.
        from ocat.memory import MemoryStore

        monkeypatch.setattr(MemoryStore, "nearest", broken)  # what retrieval reads vectors with
        # ... and the store answers nothing else either: a search that fails while the store
        # answers is only that turn's (tests/unit/test_trust_big_prompt.py).
        monkeypatch.setattr(MemoryStore, "count", broken)
        await send(app, pilot, "still there?")
        notices = [str(w.render()) for w in app.query(NoticeMessage)]
        assert any("Memory is off" in n and "disk I/O error" in n for n in notices)
        assert "You said: still there?" in app.query(AssistantMessage).last().source
        await send(app, pilot, "and now?")
        assert "You said: and now?" in app.query(AssistantMessage).last().source
        await send(app, pilot, "/vstats")
        await wait_for_command(app, pilot)
        assert "memory is off" in str(list(app.query(NoticeMessage))[-1].render())


async def test_a_corrupt_store_is_reported_and_the_chat_works_without_memory(tmp_path: Any) -> None:
    store_dir = tmp_path / "store"
    store_dir.mkdir()
    (store_dir / "chroma.sqlite3").write_bytes(b"this is not a database" * 100)
    app = make_app(dummy=True, **{"vector_store.path": str(store_dir)})
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        assert app.memory_view.state is MemoryState.OFF
        assert any("Memory is off" in str(w.render()) for w in app.query(NoticeMessage))
        await send(app, pilot, "hello")
        assert "You said: hello" in app.query(AssistantMessage).last().source
    assert (store_dir / "chroma.sqlite3").read_bytes() == b"this is not a database" * 100  # left as it was


@pytest.mark.slow
async def test_a_long_vdoc_shows_progress_and_esc_stops_it_keeping_what_was_stored(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from ocat.memory.storage.store import WRITE_BATCH
    from ocat.ui.widgets import TaskProgress

    # One paragraph a chunk, a batch's worth and more: a write of one batch shows no progress. Esc
    # lands while some are still to be written because the model is held on its first step until
    # Esc is pressed (it was 3,000 chunks, to be sure a machine of any speed was still embedding).
    paragraphs = WRITE_BATCH + 50
    big = tmp_path / "big.txt"
    big.write_text("\n\n".join(f"Paragraph {i} is about topic number {i}." for i in range(paragraphs)))
    app = make_app(dummy=True, **{"chunking.strategy": "fixed_size", "chunking.chunk_size": 40,
                                  "chunking.chunk_overlap": 0, "chunking.max_chunk_size": 40})
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        store = app.session.session_memory.store
        pressed = threading.Event()
        embed = store.embedder.embed

        def slow_model(texts: Any) -> Any:
            pressed.wait(60)
            return embed(texts)

        monkeypatch.setattr(store.embedder, "embed", slow_model)
        await send(app, pilot, f"/vdoc {big}")
        await wait_for(pilot, lambda: app.query(TaskProgress), "the progress bar")
        await pilot.press("escape")
        pressed.set()
        assert app.commands.worker is not None
        await app.commands.worker.wait()
        await pilot.pause()
        assert not app.query(TaskProgress)
        notice = str(list(app.query(NoticeMessage))[-1].render())
        assert "cancelled at" in notice and "completes it" in notice
        stored = store.count("document")
        assert 0 < stored < paragraphs
        await send(app, pilot, f"/vdoc {big}")
        await app.commands.worker.wait()
        await pilot.pause()
        total = store.count("document")
        assert total > stored
        assert f"{stored} already stored" in str(list(app.query(NoticeMessage))[-1].render())


HOSTILE = "\x1b[31mred\x1b[0m \x1b]0;pwned\x07 [link=https://evil.example]click[/link] [bold]b[/bold]"


def no_raw_controls(text: str) -> bool:
    return not any(ch in text for ch in "\x1b\x07\x9b")


@pytest.mark.slow
async def test_hostile_text_is_shown_literally_everywhere(llm_server: Any) -> None:
    llm_server.reply = "answer " + HOSTILE
    app = make_app(llm_server, **{"display.context_mode": "on"})
    async with app.run_test(size=(120, 40)) as pilot:
        await memory_ready(app, pilot)
        remember(app, "evil-thread", (f"remember {HOSTILE}", f"stored {HOSTILE}"))
        await send(app, pilot, f"remember {HOSTILE}")
        shown = {
            "prompt": str(app.query(UserMessage).last().render()),
            "answer": app.query(AssistantMessage).last().source,
            "memory": " ".join(str(w.render()) for w in app.query(".memory Static")),
        }
        await send(app, pilot, "/vquery remember red click")
        await wait_for(pilot, lambda: app.query(".result-table"), "the table")
        from textual.widgets import DataTable

        table = app.query(DataTable).last()
        shown["table"] = " ".join(str(table.get_cell_at((r, len(table.columns) - 1))) for r in range(table.row_count))
        await send(app, pilot, "/continue")
        await wait_for(pilot, lambda: isinstance(app.screen, ChoicePicker), "the picker")
        options = app.screen.query_one(OptionList)
        shown["picker"] = " ".join(str(options.get_option_at_index(i).prompt) for i in range(options.option_count))
        for where, text in shown.items():
            assert no_raw_controls(text), where
            assert "\\x1b[31m" in text, where
        assert "[link=https://evil.example]" in shown["prompt"] and "[bold]" in shown["prompt"]
        screen = app.export_screenshot()
        assert "pwned" in screen and no_raw_controls(screen)
    stored = app.session.history[-1]
    assert stored.assistant_response == llm_server.reply  # kept as it came; only the display escapes it
