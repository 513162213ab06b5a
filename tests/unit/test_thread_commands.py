"""Threads you can manage: titles (/rename), deleting a whole thread, exporting a conversation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ocat.commands import Choose, Confirm, run_command
from ocat.memory import MemoryStore
from ocat.operations.threads import conversation_markdown, default_title
from ocat.chat.session import ChatSession


def test_a_thread_is_named_by_its_first_prompt_until_renamed(session: ChatSession, store: MemoryStore) -> None:
    session.record("we're renovating the kitchen; the contractor quoted far too much for the cabinets", "ok", [])
    listed = run_command(session, "/threads")
    assert listed.columns[-1] == "title"
    assert listed.rows[0][3] == "we're renovating the kitchen; the contractor quoted far too…"
    assert run_command(session, "/rename   Kitchen   renovation ").text == "This thread is now called 'Kitchen renovation'."
    assert run_command(session, "/threads").rows[0][3] == "Kitchen renovation"
    picker = run_command(ChatSession(session.settings, store=store), "/continue").request
    assert isinstance(picker, Choose) and picker.options[0][1].endswith("Kitchen renovation")
    # An empty title gives the thread its first prompt back as its name; the store kept the title meanwhile.
    assert "first prompt again" in run_command(session, "/rename").text
    assert run_command(session, "/threads").rows[0][3].startswith("we're renovating")


def test_deleting_a_thread_asks_then_removes_all_its_exchanges(session: ChatSession, store: MemoryStore) -> None:
    other = ChatSession(session.settings, store=store)
    other.record("plan the garden", "tomatoes first", [])
    other.record("and then?", "beans", [])
    session.record("unrelated", "yes", [])
    ask = run_command(session, f"/deletethread {other.thread_id[:8]}").request
    assert isinstance(ask, Confirm) and "'plan the garden' (2 exchanges)" in ask.question
    assert store.count("exchange") == 3  # asking deletes nothing
    done = ask.then()
    assert done.text == "Deleted the thread 'plan the garden' (2 exchanges)." and not done.conversation_replaced
    assert store.count("exchange") == 1 and store.get_thread(other.thread_id) == []
    # This thread: gone from memory, and the chat starts a new one.
    old = session.thread_id
    mine = run_command(session, "/deletethread").request
    assert isinstance(mine, Confirm)
    assert mine.then().conversation_replaced and session.thread_id != old and store.count("exchange") == 0
    assert run_command(session, "/deletethread nosuch").error


def test_export_writes_the_conversation_as_markdown(session: ChatSession, tmp_path: Path) -> None:
    assert run_command(session, f"/export {tmp_path / 'empty.md'}").error  # nothing to write yet
    session.record("# not a heading\nsecond line", "Here is a list:\n\n- one\n- two", [])
    run_command(session, "/rename garden plans")
    done = run_command(session, f"/export {tmp_path}")
    written = tmp_path / "ocat-garden-plans.md"
    assert done.text.startswith("Wrote 1 exchange to") and written.is_file()
    text = written.read_text()
    assert text.startswith("# garden plans\n")
    assert "> # not a heading\n> second line" in text  # a prompt cannot change the outline
    assert "- one\n- two" in text and not list(tmp_path.glob("*.partial"))
    run_command(session, f"/export {tmp_path / 'named.md'}")
    assert (tmp_path / "named.md").read_text() == text


def test_titles_and_markdown_unit() -> None:
    assert default_title("\n\n  short  \nmore") == "short"
    assert default_title("") == "(untitled)"
    assert conversation_markdown("t", []) == "# t\n"


def test_retry_takes_the_last_exchange_back_and_asks_its_prompt_again(session: ChatSession, store: MemoryStore) -> None:
    from ocat.commands import Send

    assert run_command(session, "/retry").error  # nothing to retry yet
    session.record("first", "one", [])
    session.record("what is the capital of Australia?", "Sydney", [])
    again = run_command(session, "/retry")
    assert again.request == Send("what is the capital of Australia?") and again.conversation_replaced
    assert [e.user_prompt for e in session.history] == ["first"] and store.count("exchange") == 1


@pytest.mark.slow  # the app's memory runs the real model
@pytest.mark.anyio
async def test_retry_in_the_app_replaces_the_stored_answer(llm_server: Any) -> None:
    from ocat.ui.answer import AssistantMessage
    from ocat.ui.widgets import UserMessage
    from tests.support.pilot import make_app, memory_ready, send, wait_for, wait_for_command

    app = make_app(llm_server)
    async with app.run_test(size=(80, 24)) as pilot:
        await memory_ready(app, pilot)
        llm_server.reply = "Sydney"
        await send(app, pilot, "what is the capital of Australia?")
        llm_server.reply = "Canberra"
        await send(app, pilot, "/retry")
        await wait_for_command(app, pilot)
        await wait_for(pilot, lambda: app.turn is not None and app.turn.is_finished and app.last_answer == "Canberra",
                       "the second answer")
        store = app.session.session_memory.store
        assert store is not None and store.count("exchange") == 1
        [kept] = app.session.history
        assert store.get(kept.exchange_id).assistant_response == "Canberra"
        # The screen shows the question once, with the new answer.
        assert [str(w.render()) for w in app.query(UserMessage)] == ["what is the capital of Australia?"]
        assert [w.source for w in app.query(AssistantMessage)] == ["Canberra"]
        # What /retry said comes before the prompt it sends again, not between it and its answer.
        shown = [str(w.render()) for w in app.query("NoticeMessage, UserMessage")]  # in screen order
        assert shown.index("Asking again; the earlier answer is forgotten.") < shown.index(
            "what is the capital of Australia?")
