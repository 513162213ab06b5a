"""The chat never loses a word: exchanges made while memory loads or fails are kept and written
later, every failure of a command or a worker is shown (and logged) without leaving the chat
stuck, stored dates that no calendar holds and paths that look like markup cannot crash it."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from ocat.errors import StoreError
from ocat.memory import MemoryStore
from ocat.text.terminal import local_time, without_controls
from ocat.ui.answer import AssistantMessage
from ocat.ui.memory_view import MemoryState, MemoryStatus
from tests.support.fakes import FakeLLMServer
from tests.support.pilot import make_app, memory_ready, notices, send, wait_for, wait_for_command
from tests.support.window import start_window

pytestmark = pytest.mark.anyio


# What the user says is never lost


@pytest.mark.slow
async def test_a_turn_sent_while_memory_loads_is_written_once_memory_is_ready(
    llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ocat.chat import turn_inputs
    from ocat.chat.session_memory import SessionMemory

    opened = threading.Event()
    real_open = SessionMemory.open

    def slow_open(self: SessionMemory, **kwargs: Any) -> bool:
        opened.wait(30)  # memory stays "loading" until the test lets it open
        return real_open(self, **kwargs)

    monkeypatch.setattr(SessionMemory, "open", slow_open)
    monkeypatch.setattr(turn_inputs, "WAKE_WAIT_SECONDS", 0.5)  # the turn waits for memory that opens only later
    app = make_app(llm_server)
    async with app.run_test(size=(100, 30)) as pilot:
        assert app.memory_view.state is MemoryState.LOADING
        await send(app, pilot, "my bike is a red gazelle")
        assert [e.user_prompt for e in app.session.session_memory.unsaved] == ["my bike is a red gazelle"]
        assert not any("Not remembered" in n for n in notices(app))  # loading: kept quietly
        opened.set()
        await wait_for(pilot, lambda: app.memory_view.status == MemoryStatus(MemoryState.READY, exchanges=1), "memory ready", seconds=30)
        assert any("remembered too" in n for n in notices(app))
        assert app.session.session_memory.unsaved == []
        stored = app.session.session_memory.store.get_session(app.session.session_id)
        assert [e.user_prompt for e in stored] == ["my bike is a red gazelle"]


@pytest.mark.slow
async def test_a_failed_write_is_shown_on_its_turn_kept_and_written_when_the_store_is_back(
    llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app(llm_server)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        real_add = MemoryStore.add_exchanges

        def full_disk(self: MemoryStore, *args: Any, **kwargs: Any) -> int:
            raise StoreError("cannot write to the memory store: database or disk is full")

        # On the class: the store opened again after the failure fails the same way.
        monkeypatch.setattr(MemoryStore, "add_exchanges", full_disk)
        await send(app, pilot, "remember the boiler code 4471")
        assert any("Not remembered yet" in n and "disk is full" in n for n in notices(app))
        assert [e.user_prompt for e in app.session.session_memory.unsaved] == ["remember the boiler code 4471"]
        # The store still answers: one failed write keeps memory on (issue 23), and the next
        # turn tries the kept exchange again instead of waiting for memory to "come back".
        assert app.session.session_memory.on

        monkeypatch.setattr(MemoryStore, "add_exchanges", real_add)
        await send(app, pilot, "and the gate code is 1234")
        stored = app.session.session_memory.store.get_session(app.session.session_id)
        assert [e.user_prompt for e in stored] == ["remember the boiler code 4471", "and the gate code is 1234"]
        assert app.session.session_memory.unsaved == []


@pytest.mark.slow
async def test_when_the_store_server_child_dies_the_chat_serves_again_and_keeps_the_turn(
    llm_server: FakeLLMServer, tmp_path: Path
) -> None:
    """The real serving path: the chat owns the store and serves it with Chroma's server child."""
    from ocat.config.loading import load_settings
    from ocat.chat.session import ChatSession
    from ocat.ui.app import OcatApp

    settings = load_settings(overrides={
        "llm.model": "openai/fake-model", "llm.api_base": llm_server.api_base, "llm.api_key": "sk-test",
        "vector_store.path": str(tmp_path / "served"),
    })
    app = OcatApp(ChatSession(settings), serve=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        lease = app.session.session_memory.store.lease
        assert lease.role == "serving owner"
        await send(app, pilot, "first words")
        lease.server_process.kill()
        lease.server_process.wait(timeout=30)
        await send(app, pilot, "second words, after the server died")
        await wait_for(pilot, lambda: app.session.session_memory.unsaved == [], "the turn written", seconds=60)
        store = app.session.session_memory.store
        assert store is not None and store.lease is not lease and store.lease.role == "serving owner"
        stored = store.get_session(app.session.session_id)
        assert [e.user_prompt for e in stored] == ["first words", "second words, after the server died"]
    app.memory_view.closing.join(30)
    # Given up on exit: another process can take the store over at once.
    from ocat.memory.sharing.owner_lock import acquire

    acquire(tmp_path / "served", serve=False, wait_seconds=5).release()


@pytest.mark.slow
async def test_a_deleted_exchange_is_no_longer_sent_to_the_model(llm_server: FakeLLMServer) -> None:
    app = make_app(llm_server)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        await send(app, pilot, "my password hint is sunflower")
        exchange_id = app.session.history[-1].exchange_id
        await send(app, pilot, f"/vdelete {exchange_id} --yes")
        await wait_for_command(app, pilot)
        assert any("no longer sent to the model" in n for n in notices(app))
        await send(app, pilot, "what was it?")
        sent = llm_server.requests[-1]["messages"]
        assert not any("sunflower" in m["content"] for m in sent)


# Nothing a command does breaks the chat


@pytest.mark.slow
async def test_vdelete_yes_without_an_id_is_a_usage_error_and_the_chat_goes_on() -> None:
    app = make_app(dummy=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        await send(app, pilot, "/vdelete --yes")
        await wait_for_command(app, pilot)
        assert "needs one id" in notices(app)[-1]
        await send(app, pilot, "/help")
        await wait_for_command(app, pilot)
        assert notices(app)[-1].startswith("Commands by purpose")


@pytest.mark.slow
async def test_a_command_that_fails_unexpectedly_is_shown_logged_and_the_chat_goes_on(
    monkeypatch: pytest.MonkeyPatch, isolated_home: Path
) -> None:
    from ocat import commands

    def broken(session: Any) -> Any:  # /vstats takes no arguments
        raise RuntimeError("a bug in a command")

    monkeypatch.setitem(commands.REGISTRY, "vstats", commands.REGISTRY["vstats"].__class__(
        name="vstats", help="broken", handler=broken))
    app = make_app(dummy=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        await send(app, pilot, "/vstats")
        await wait_for_command(app, pilot)
        message = notices(app)[-1]
        assert "RuntimeError: a bug in a command" in message and "ocat.log" in message
        await send(app, pilot, "still here?")
        assert "You said: still here?" in app.query(AssistantMessage).last().source
    log = (isolated_home / ".local" / "state" / "ocat" / "ocat.log").read_text()
    assert "Traceback" in log and "a bug in a command" in log


@pytest.mark.slow
async def test_dates_no_calendar_holds_are_shown_as_missing_not_a_crash() -> None:
    from ocat.records import Exchange

    app = make_app(dummy=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        store = app.session.session_memory.store
        for n, stamp in enumerate((1e300, -1e20, float("inf"))):
            odd = Exchange(user_prompt=f"odd date {n} garden", assistant_response="yes", thread_id=f"odd-{n}",
                           session_id="old", exchange_id=f"odd-{n}", timestamp=1.0)
            metadata = odd.to_metadata() | {"timestamp": stamp}
            # Written past ocat's own checks, as another client or an old import could have.
            store.exchanges.add(ids=[odd.exchange_id], embeddings=[[0.1] * 384], documents=[odd.text],
                                metadatas=[metadata])
        for command in ("/threads", '/vquery "odd date garden"', "/continue odd-0", "/history"):
            await send(app, pilot, command)
            await wait_for_command(app, pilot)
            assert "failed unexpectedly" not in notices(app)[-1], command
        assert app.is_running


@pytest.mark.slow
async def test_a_store_path_that_looks_like_markup_is_shown_as_text(tmp_path: Path) -> None:
    store = tmp_path / "[bold]notes[/bold] [link=x]"
    app = make_app(dummy=True, **{"vector_store.path": str(store)})
    async with app.run_test(size=(160, 30)) as pilot:
        await memory_ready(app, pilot)
        assert "[bold]notes[/bold] [link=x]" in str(app.query_one("#header").render())


@pytest.mark.slow
async def test_copies_leave_terminal_controls_out(llm_server: FakeLLMServer) -> None:
    llm_server.reply = "run this:\n```sh\necho hi\x1b[201~; rm -rf ~\n```\n"
    app = make_app(llm_server)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        await send(app, pilot, "give me a command")
        await pilot.press("ctrl+o")
        assert "\x1b" not in app.clipboard and "echo hi[201~; rm -rf ~" in app.clipboard
        await pilot.press("ctrl+b")
        assert app.clipboard == "echo hi[201~; rm -rf ~"


# The pieces, without the app


@pytest.mark.parametrize("stamp", [1e300, -1e20, float("nan"), float("inf"), "2024-01-01", None, 0, True])
def test_local_time_never_raises(stamp: object) -> None:
    assert local_time(stamp) == "-"


def test_local_time_formats_a_real_date() -> None:
    assert local_time(86400.0 * 365, "%Y") == "1971"


def test_without_controls_keeps_text_newlines_and_tabs() -> None:
    assert without_controls("a\x1b[31mb\tc\r\nd\x07\u202e") == "a[31mb\tc\nd"


async def test_a_chat_that_reached_the_store_through_another_window_takes_over_when_it_closes(
    llm_server: FakeLLMServer, cli: Any
) -> None:
    """The second window is a client of the first's server; when the first quits, the second's
    next turn opens the store again, becomes its owner, and loses nothing."""
    from ocat.config.loading import load_settings
    from ocat.chat.session import ChatSession
    from ocat.ui.app import OcatApp

    first = start_window(cli)  # a stand-in for a chat window that owns and serves the store
    settings = load_settings(overrides={
        "llm.model": "openai/fake-model", "llm.api_base": llm_server.api_base, "llm.api_key": "sk-test",
        "vector_store.path": str(cli.store_path),
    })
    app = OcatApp(ChatSession(settings), serve=True)
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await memory_ready(app, pilot)
            assert app.session.session_memory.store.lease.role == "client"
            await send(app, pilot, "said while the other window owned the store")
            assert first.stdin is not None
            first.stdin.write("quit\n")
            first.stdin.flush()
            assert first.wait(timeout=60) == 0
            await send(app, pilot, "said after it closed")
            await wait_for(pilot, lambda: app.session.session_memory.unsaved == [], "both written", seconds=60)
            store = app.session.session_memory.store
            assert store is not None and store.lease.role == "serving owner"
            stored = store.get_session(app.session.session_id)
            assert [e.user_prompt for e in stored] == [
                "said while the other window owned the store", "said after it closed"]
    finally:
        if first.poll() is None:
            first.kill()


@pytest.mark.slow
async def test_while_another_process_holds_the_store_the_chat_says_whom_it_waits_for(tmp_path: Path) -> None:
    from filelock import FileLock

    from ocat.memory.sharing.owner_lock import LOCK_FILE

    store = tmp_path / "held"
    store.mkdir()
    held = FileLock(str(store / LOCK_FILE), thread_local=False)
    held.acquire()  # as a one-shot command (an import, say) holding the store would
    try:
        app = make_app(dummy=True, **{"vector_store.path": str(store)})
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: app.memory_view.state is MemoryState.WAITING, "the wait is shown", seconds=30)
            assert "memory waiting…" in str(app.query_one("#header").render())
            assert any("waiting for the store" in n and "does not share it" in n for n in notices(app))
            held.release()
            await wait_for(pilot, lambda: app.memory_view.status == MemoryStatus(MemoryState.READY, exchanges=0), "memory ready", seconds=30)
    finally:
        held.release()
