"""Forking a conversation (/fork): a new thread from an earlier exchange, linked to where it came
from, in the commands, the store, export and import, and the memory browser (ocat.operations.forks)."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from ocat.chat.session import ChatSession
from ocat.commands import run_command
from ocat.memory import MemoryStore, StoreLocation
from ocat.memory.storage.export_import import export_memory, import_memory
from ocat.operations.browse import Entry, entry_markdown
from ocat.operations.forks import link_of, thread_history
from tests.support.cli import Cli
from tests.support.fakes import FakeEmbedder, FakeLLMServer

PROMPTS = ["plan the footbridge deck", "which damper suits it?", "and the bearings?"]


def three_exchanges(session: ChatSession) -> None:
    for n, prompt in enumerate(PROMPTS):
        session.record(prompt, f"answer {n + 1}", [])


def test_fork_counts_back_and_both_threads_keep_all_their_exchanges(session: ChatSession, store: MemoryStore) -> None:
    three_exchanges(session)
    source = session.thread_id
    forked = run_command(session, "/fork 2")
    assert not forked.error and forked.conversation_replaced
    assert forked.text.startswith("Forked at exchange 2 of 3 ('which damper suits it?'): a new thread with the "
                                  "2 exchanges up to there, called 'plan the footbridge deck (fork)'; "
                                  "'plan the footbridge deck' keeps all 3.")
    assert session.thread_id != source and [e.user_prompt for e in session.history] == PROMPTS[:2]
    session.record("what about a tuned mass damper?", "answer 4", [])
    # The fork's own exchange is in memory under the fork, with its link; the source is whole.
    [own] = store.get_thread(session.thread_id)
    assert (own.forked_from_thread, own.forked_from_exchange) == (source, session.history[1].exchange_id)
    assert [e.user_prompt for e in store.get_thread(source)] == PROMPTS
    assert store.count("exchange") == 4  # nothing copied
    listed = {row[0]: row[3] for row in run_command(session, "/threads").rows}
    assert listed[session.thread_id[:8]] == "plan the footbridge deck (fork)"
    # Continued later, the fork is given its history again: the source's up to the fork, then its own.
    later = ChatSession(session.settings, store=store)
    resumed = run_command(later, f"/continue {session.thread_id}")
    assert resumed.text.startswith("Resumed thread") and "after the 2 exchanges it was forked with" in resumed.text
    assert [e.user_prompt for e in later.history] == [*PROMPTS[:2], "what about a tuned mass damper?"]
    later.record("and its mass?", "answer 5", [])
    assert link_of(store.get_thread(later.thread_id)) == link_of([own])
    assert len(thread_history(store, source)) == 3


def test_a_fork_of_a_forks_first_part_links_to_the_thread_that_holds_that_exchange(
    session: ChatSession, store: MemoryStore
) -> None:
    three_exchanges(session)
    source, first = session.thread_id, session.history[0].exchange_id
    run_command(session, "/fork")  # the whole conversation
    session.record("fork's own", "answer", [])
    assert "called 'plan the footbridge deck (fork) (fork)'" in run_command(session, "/fork 4").text
    assert session.forked_from is not None and session.forked_from.exchange_id == first
    assert session.forked_from.thread_id == source
    session.record("second fork's own", "answer", [])
    assert [e.user_prompt for e in thread_history(store, session.thread_id)] == [PROMPTS[0], "second fork's own"]


def test_fork_refuses_what_it_cannot_do_and_retry_leaves_the_source_alone(
    session: ChatSession, store: MemoryStore
) -> None:
    assert run_command(session, "/fork").error  # nothing to fork yet
    three_exchanges(session)
    too_far = run_command(session, "/fork 4")
    assert too_far.error and "this conversation has 3 exchanges: /fork takes 1 (the last) to 3" in too_far.text
    assert run_command(session, "/fork 0").error
    run_command(session, "/fork")
    retried = run_command(session, "/retry")  # the last exchange is the source's: never taken from it
    assert retried.error and "stays in the thread it belongs to" in retried.text
    assert store.count("exchange") == 3 and len(session.history) == 3


def test_export_and_import_keep_the_link_and_the_title(session: ChatSession, store: MemoryStore, tmp_path: Path) -> None:
    three_exchanges(session)
    source = session.thread_id
    run_command(session, "/fork 3")
    session.record("a different deck", "answer", [])
    out = io.StringIO()
    export_memory(store, out)
    assert '"forked_from_thread": "' + source in out.getvalue()
    backup = tmp_path / "backup.jsonl"
    backup.write_text(out.getvalue())
    restored = MemoryStore.open(StoreLocation(path=tmp_path / "restored"), FakeEmbedder(), name="restored")
    try:
        import_memory(restored, backup)
        assert [e.user_prompt for e in thread_history(restored, session.thread_id)] == [PROMPTS[0], "a different deck"]
        assert restored.threads.titles([session.thread_id]) == {session.thread_id: "plan the footbridge deck (fork)"}
        again = io.StringIO()
        export_memory(restored, again)
        assert again.getvalue() == out.getvalue()
    finally:
        restored.close()


def test_the_memory_browser_shows_the_link_both_ways(session: ChatSession, store: MemoryStore) -> None:
    three_exchanges(session)
    source = session.thread_id
    run_command(session, "/fork 2")
    session.record("what about a tuned mass damper?", "answer 4", [])
    fork = entry_markdown(store, Entry("thread", session.thread_id, "", None, "chat"))
    assert fork.startswith("# plan the footbridge deck (fork)\n\nForked from 'plan the footbridge deck' "
                           f"(thread {source[:8]}), after its exchange 2 of 3 ('which damper suits it?').\n")
    shown = entry_markdown(store, Entry("thread", source, "", None, "chat"))
    assert f"Forked into 1 thread: 'plan the footbridge deck (fork)' ({session.thread_id[:8]})." in shown
    # The source deleted: the fork keeps its own exchange, and says where it came from is gone.
    run_command(session, f"/deletethread {source}").request.then()  # type: ignore[union-attr]
    assert "Forked from a thread no longer in memory" in entry_markdown(
        store, Entry("thread", session.thread_id, "", None, "chat"))


@pytest.mark.parametrize("line", ['"forked_from_thread": 7', '"forked_from_exchange": null'])
def test_import_refuses_a_link_that_is_not_text(store: MemoryStore, tmp_path: Path, line: str) -> None:
    from ocat.errors import InputFileError

    record = ('{"kind": "exchange", "exchange_id": "e1", "thread_id": "t1", "session_id": "s", "user_prompt": "a", '
              '"assistant_response": "b", "timestamp": 1760000000.0, "prior_exchange_ids": [], '
              '"thread_session_id": "t1_s", "thread_continuation_seq": 0, ' + line + '}')
    bad = tmp_path / "bad.jsonl"
    bad.write_text(record + "\n")
    with pytest.raises(InputFileError, match="must be a string"):
        import_memory(store, bad)


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_key_on_a_focused_message_forks_there_in_the_full_screen_chat(llm_server: FakeLLMServer) -> None:
    from ocat.ui.answer import AssistantMessage
    from ocat.ui.widgets import PromptInput, UserMessage
    from tests.support.pilot import make_app, memory_ready, notices, send, wait_for_command

    app = make_app(llm_server)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        for prompt in PROMPTS:
            await send(app, pilot, prompt)
        source = app.session.thread_id
        await pilot.press("alt+up")  # keys.messages: the latest message
        assert isinstance(app.focused, AssistantMessage)
        await pilot.press("up", "up")  # the second exchange's answer
        assert isinstance(app.focused, AssistantMessage)
        assert app.focused.exchange_id == app.session.history[1].exchange_id
        await pilot.press("f")  # keys.fork
        await wait_for_command(app, pilot)
        assert isinstance(app.focused, PromptInput) and app.focused.text == ""  # the key was not typed
        assert [str(w.render()) for w in app.query(UserMessage)] == PROMPTS[:2]
        assert "Forked at exchange 2 of 3 ('which damper suits it?')" in notices(app)[-1]
        await send(app, pilot, "what about a tuned mass damper?")
        asked = [m["content"] for m in llm_server.requests[-1]["messages"] if m["role"] == "user"]
        assert asked == [*PROMPTS[:2], "what about a tuned mass damper?"]
        store = app.session.session_memory.store
        assert store is not None and len(store.get_thread(source)) == 3
        assert [e.user_prompt for e in store.get_thread(app.session.thread_id)] == ["what about a tuned mass damper?"]
        # Down past the last message is the prompt again; a fork asked while an answer runs is refused.
        await pilot.press("alt+up", "down")
        assert isinstance(app.focused, PromptInput)
        # The answer is held until the fork has been tried (it trickled for 6 s, a race with the keys).
        answer, step = threading.Event(), llm_server.next_step

        def held(body: dict[str, Any]) -> Any:
            answer.wait(60)
            return step(body)

        llm_server.next_step = held  # type: ignore[method-assign]
        app.focused.text = "a slow one"
        await pilot.press("enter", "alt+up", "up", "f")
        await pilot.pause()
        assert "fork once it has ended" in notices(app)[-1] and len(app.session.history) == 3
        assert app.turn is not None
        answer.set()
        await app.turn.wait()
        llm_server.next_step = step  # type: ignore[method-assign]
        # /fork N in the window does the same, counting back.
        await send(app, pilot, "/fork 4")
        await wait_for_command(app, pilot)
        assert [str(w.render()) for w in app.query(UserMessage)] == PROMPTS[:1]


@pytest.mark.slow
def test_snapshot_a_focused_message_at_80x24(snap_compare: Any) -> None:
    from tests.support.pilot import make_app, memory_ready, send

    async def settle(pilot: Any) -> None:
        await memory_ready(pilot.app, pilot)
        await send(pilot.app, pilot, "plan the footbridge deck")
        await send(pilot.app, pilot, "which damper suits it?")
        await pilot.press("alt+up", "up", "up")  # the first exchange's answer
        await pilot.pause()

    assert snap_compare(make_app(dummy=True), terminal_size=(80, 24), run_before=settle)


@pytest.mark.slow
def test_fork_in_the_line_mode_then_export_and_import_keep_the_link(
    cli: Cli, llm_server: FakeLLMServer, tmp_path: Path
) -> None:
    args = ["--plain", "--model", "openai/fake-model", "--set", f"llm.api_base={llm_server.api_base}",
            "--set", "llm.api_key=sk-test"]
    said = "\n".join([*PROMPTS, "/fork 2", "what about a tuned mass damper?", "/threads"]) + "\n"
    chat = cli(*args, input=said)
    assert chat.returncode == 0, chat.stderr
    assert "Forked at exchange 2 of 3 ('which damper suits it?')" in chat.stdout
    assert "plan the footbridge deck (fork)" in chat.stdout  # /threads lists the fork by its title
    asked = [m["content"] for m in llm_server.requests[-1]["messages"] if m["role"] == "user"]
    assert asked == [*PROMPTS[:2], "what about a tuned mass damper?"]
    backup = tmp_path / "backup.jsonl"
    assert cli("--export-memory", str(backup)).returncode == 0
    lines = [json.loads(line) for line in backup.read_text().splitlines()]
    [fork] = [r for r in lines if r.get("forked_from_thread")]
    [source] = [r for r in lines if r["kind"] == "exchange" and r["user_prompt"] == PROMPTS[1]]
    assert (fork["forked_from_thread"], fork["forked_from_exchange"]) == (source["thread_id"], source["exchange_id"])
    other = ["--set", f"vector_store.path={tmp_path / 'restored'}"]
    assert cli("--import-memory", str(backup), *other).returncode == 0
    again = tmp_path / "again.jsonl"
    assert cli("--export-memory", str(again), *other).returncode == 0
    assert again.read_text() == backup.read_text()
