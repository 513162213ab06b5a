"""The chat app, driven with Textual's Pilot: chat, memory, errors, cancel, commands, and its look."""

from __future__ import annotations

from contextlib import suppress
from typing import Any

import pytest
from textual.widgets import Collapsible, DataTable
from textual.worker import WorkerCancelled

from ocat.ui.answer import AssistantMessage
from ocat.ui.memory_view import MemoryState, MemoryStatus
from ocat.ui.widgets import NoticeMessage, PromptInput, UserMessage
from tests.support.fakes import FakeLLMServer
from tests.support.pilot import (
    conversation,
    make_app,
    memory_ready,
    send,
    wait_for,
    wait_for_command,
)

pytestmark = [pytest.mark.slow, pytest.mark.anyio]


async def test_a_turn_streams_the_answer_and_remembers_it(llm_server: FakeLLMServer) -> None:
    llm_server.reply = "# Title\n\nSome **bold** text."
    app = make_app(llm_server)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        assert app.memory_view.status == MemoryStatus(MemoryState.READY, exchanges=0)
        await send(app, pilot, "hello there")
        kinds = [type(w) for w in conversation(app)]
        assert kinds == [UserMessage, AssistantMessage]
        assert app.last_answer == "# Title\n\nSome **bold** text."
        assert app.memory_view.status == MemoryStatus(MemoryState.READY, exchanges=1)
        assert "· 1 exchange ·" in str(app.query_one("#header").render())
        assert app.query_one(PromptInput).text == ""
        assert "11 tokens in, 7 out" in str(app.query_one("#status").render())
    assert llm_server.requests[-1]["stream"] is True


async def test_a_provider_error_shows_in_the_chat_and_puts_the_prompt_back(llm_server: FakeLLMServer) -> None:
    llm_server.status = 500
    app = make_app(llm_server, **{"llm.timeout_seconds": 5})
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        await send(app, pilot, "will this work?")
        notices = [w for w in conversation(app) if isinstance(w, NoticeMessage)]
        assert notices and "error" in notices[-1].classes
        assert app.query_one(PromptInput).text == "will this work?"
        assert app.session.session_memory.store is not None and app.session.session_memory.store.count("exchange") == 0
        assert not any(isinstance(w, AssistantMessage) for w in conversation(app))


async def test_escape_cancels_keeps_the_partial_answer_and_stores_nothing(llm_server: FakeLLMServer) -> None:
    llm_server.reply = "A long answer that arrives slowly, piece by piece, over several seconds."
    llm_server.delay = 0.3
    app = make_app(llm_server)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        app.query_one(PromptInput).text = "tell me slowly"
        await pilot.press("enter")

        def answering() -> bool:
            answer = app.query(AssistantMessage)
            return bool(answer and answer.first().source)

        await wait_for(pilot, answering, "the answer starts", seconds=30)
        await pilot.press("escape")
        assert app.turn is not None
        with suppress(WorkerCancelled):  # cancelled is what Esc should do; the checks below say so
            await app.turn.wait()
        await pilot.pause()
        partial = app.query_one(AssistantMessage).source
        assert partial and partial != llm_server.reply
        assert any("Cancelled" in str(w.render()) for w in app.query(NoticeMessage))
        assert app.session.session_memory.store is not None and app.session.session_memory.store.count("exchange") == 0
        assert app.session.history == []


async def test_escape_once_the_answer_is_in_leaves_the_turn_to_finish(
    llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Esc (or Ctrl+C) while the whole answer is being written to memory has nothing to stop:
    before, it cancelled the window's last steps (no fork key on the messages, no count)."""
    import threading

    from ocat.memory import MemoryStore

    writing, release = threading.Event(), threading.Event()
    real = MemoryStore.add_exchanges

    def held(store: MemoryStore, exchanges: Any, **options: Any) -> int:
        writing.set()
        release.wait(30)
        return real(store, exchanges, **options)

    app = make_app(llm_server)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        monkeypatch.setattr(MemoryStore, "add_exchanges", held)
        app.query_one(PromptInput).text = "remember the gate code 4471"
        await pilot.press("enter")
        await wait_for(pilot, writing.is_set, "the write starts", seconds=30)
        await pilot.press("escape")
        release.set()
        assert app.turn is not None
        await app.turn.wait()  # not cancelled: it finishes
        await pilot.pause()
        asked, answer = app.query_one(UserMessage), app.query_one(AssistantMessage)
        assert asked.exchange_id and asked.exchange_id == answer.exchange_id
        assert app.memory_view.status == MemoryStatus(MemoryState.READY, exchanges=1)
        assert not any("Cancelled" in str(w.render()) for w in app.query(NoticeMessage))


async def test_memory_from_an_earlier_session_is_shown_with_its_score(llm_server: FakeLLMServer) -> None:
    first = make_app(llm_server)
    async with first.run_test(size=(100, 30)) as pilot:
        await memory_ready(first, pilot)
        await send(first, pilot, "my favourite colour is teal")
    second = make_app(llm_server, **{"display.context_mode": "on"})
    async with second.run_test(size=(100, 30)) as pilot:
        await memory_ready(second, pilot)
        await send(second, pilot, "what is my favourite colour?")
        panels = list(second.query(Collapsible))
        assert panels and "Using context from 1 memory" in panels[0].title
        shown = " ".join(str(w.render()) for w in panels[0].query("Static"))
        assert "my favourite colour is teal" in shown
    memory = [m for m in llm_server.requests[-1]["messages"] if m["role"] == "system" and "<memory" in m["content"]]
    assert memory


async def test_commands_render_tables_and_errors() -> None:
    app = make_app(dummy=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        await send(app, pilot, "/vadd the spare key is under the blue flowerpot")
        await wait_for_command(app, pilot)
        await send(app, pilot, '/vquery "where is the spare key" 3')
        await wait_for_command(app, pilot)
        tables = list(app.query(DataTable))
        assert tables and tables[-1].row_count >= 1
        await send(app, pilot, "/nope")
        await wait_for_command(app, pilot)
        assert "unknown command /nope" in str(list(app.query(NoticeMessage))[-1].render())
        await send(app, pilot, "/help")
        await wait_for_command(app, pilot)
        assert list(app.query(DataTable))[-1].row_count >= 5


async def test_markup_in_a_prompt_is_shown_literally() -> None:
    app = make_app(dummy=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        await send(app, pilot, "[bold red]not markup[/] \x1b[31m")
        shown = str(app.query_one(UserMessage).render())
        assert "[bold red]not markup[/]" in shown


def test_the_chat_window_looks_right(snap_compare: Any) -> None:
    async def settle(pilot: Any) -> None:
        await memory_ready(pilot.app, pilot)
        await send(pilot.app, pilot, "hello")

    assert snap_compare(make_app(dummy=True), terminal_size=(90, 24), run_before=settle)


async def test_continue_redraws_the_thread_and_new_turns_join_it() -> None:
    first = make_app(dummy=True)
    async with first.run_test(size=(100, 30)) as pilot:
        await memory_ready(first, pilot)
        first.session.dummy = False  # dummy turns are not stored; this one must be
        first.session.record("plan the garden", "tomatoes first", [])
        thread = first.session.thread_id
    second = make_app(dummy=True)
    async with second.run_test(size=(100, 30)) as pilot:
        await memory_ready(second, pilot)
        await send(second, pilot, f"/continue {thread[:8]}")
        await wait_for_command(second, pilot)
        users = [str(w.render()) for w in second.query(UserMessage)]
        assert users == ["plan the garden"]
        assert second.session.thread_id == thread and second.session.continuation_seq == 1


async def test_prompts_are_kept_across_runs_and_walked_with_up() -> None:
    from ocat.chat.prompt_history import history_file, load_history

    first = make_app(dummy=True)
    async with first.run_test(size=(100, 30)) as pilot:
        await memory_ready(first, pilot)
        await send(first, pilot, "first line\nsecond line")
    assert load_history() == ["first line\nsecond line"] and history_file().is_file()
    second = make_app(dummy=True)
    async with second.run_test(size=(100, 30)) as pilot:
        await memory_ready(second, pilot)
        await pilot.press("up")
        assert second.query_one(PromptInput).text == "first line\nsecond line"


@pytest.mark.parametrize("mode", ["on", "summary", "off"])
def test_snapshot_memory_indicator(snap_compare: Any, mode: str) -> None:
    async def settle(pilot: Any) -> None:
        app = pilot.app
        await memory_ready(app, pilot)
        from ocat.records import Exchange

        # Fixed ids and time, so the picture is the same on every run.
        app.session.session_memory.store.add_exchange(
            Exchange(user_prompt="my favourite colour is teal", assistant_response="Noted: teal.",
                     thread_id="0d5e1a2b-thread", session_id="s", exchange_id="e1", timestamp=1700000000.0)
        )
        await send(app, pilot, "what is my favourite colour?")

    assert snap_compare(make_app(dummy=True, **{"display.context_mode": mode}), terminal_size=(90, 26), run_before=settle)


@pytest.mark.parametrize("command", ["/help", "/nope"], ids=["help", "unknown"])
def test_snapshot_command_results(snap_compare: Any, command: str) -> None:
    async def settle(pilot: Any) -> None:
        await memory_ready(pilot.app, pilot)
        await send(pilot.app, pilot, command)
        await wait_for_command(pilot.app, pilot)

    assert snap_compare(make_app(dummy=True), terminal_size=(100, 30), run_before=settle)


async def test_themes_shipped_and_user_ones_and_a_broken_one() -> None:
    from ocat.config.locations import config_dir

    user_themes = config_dir() / "themes"
    user_themes.mkdir(parents=True)
    (user_themes / "mine.yaml").write_text("name: mine\nprimary: '#ff0000'\ndark: true\n")
    (user_themes / "broken.yaml").write_text("name: broken\nprimary: red\n")
    app = make_app(dummy=True, **{"display.theme": "ocat-night"})
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        assert app.theme == "ocat-night"
        assert {"ocat-night", "ocat-paper", "mine"} <= set(app.available_themes)
        assert "broken" not in app.available_themes
        await send(app, pilot, "/theme mine")
        await wait_for_command(app, pilot)
        assert app.theme == "mine"
        await send(app, pilot, "/theme nosuch")
        await wait_for_command(app, pilot)
        assert "no theme 'nosuch'" in str(list(app.query(NoticeMessage))[-1].render())


def test_snapshot_a_light_theme(snap_compare: Any) -> None:
    async def settle(pilot: Any) -> None:
        await memory_ready(pilot.app, pilot)
        await send(pilot.app, pilot, "hello in the light")

    assert snap_compare(make_app(dummy=True, **{"display.theme": "ocat-paper"}), terminal_size=(90, 24), run_before=settle)
