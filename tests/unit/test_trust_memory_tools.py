"""Issue 44 (trust, round five): the model's own memory tools hold against a model that errs.

A `remember` that would make notes replace each other in a circle is refused (the user's pinned
note stays pinned and reaches the model); a pin moves on to the note that replaces it, and the
model and the user are told; one step of many calls runs only `tools.max_calls_per_step` of
them, and one turn stores at most `memory.max_notes_per_turn` notes; a bad date or an id of a
million characters is a tool error naming the argument.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from ocat.commands import run_command
from ocat.config.loading import load_settings
from ocat.errors import UsageError
from ocat.memory import MemoryStore
from ocat.records import PINNED_KEY, SHORTENED_KEY, SUPERSEDED_KEY, Exchange
from ocat.chat.session import ChatSession
from ocat.chat.turn import Turn
from ocat.operations.lookup import resolve_thread
from ocat.operations.wake import build_wake, pins, remember as user_remember
from ocat.tools.calls import ToolCall
from tests.support.fakes import FakeLLMServer

PEANUTS = "Ana is allergic to peanuts."
SESAME = "Ana is allergic to peanuts and sesame."


def session_on(store: MemoryStore, server: FakeLLMServer, **overrides: Any) -> ChatSession:
    settings = load_settings(env={}, overrides={
        "llm.model": "openai/fake-model", "llm.api_base": server.api_base, "llm.api_key": "sk-test", **overrides})
    return ChatSession(settings, store=store)


def run(turn: Turn) -> None:
    async def go() -> None:
        async for _ in turn:
            pass

    asyncio.run(go())


def call(session: ChatSession, name: str, **arguments: Any) -> ToolCall:
    """One tool call, run by the session's tool box as a turn runs it."""
    box = session.tools().box(set())
    assert box is not None
    return box.run(ToolCall("c", name, json.dumps(arguments)))


def superseded(store: MemoryStore, record_id: str) -> Any:
    return store.get(record_id).metadata.get(SUPERSEDED_KEY)  # type: ignore[union-attr]


def replaced_note(session: ChatSession) -> tuple[str, str]:
    """The model stores PEANUTS, then SESAME replacing it: the two notes' ids."""
    [old] = call(session, "remember", text=PEANUTS).ids
    [new] = call(session, "remember", text=SESAME, replaces=old).ids
    return old, new


# -- B5: replacing never makes a circle, and a pin moves on, said -------------------------------


def test_a_replace_that_would_close_a_circle_is_refused_and_the_pin_stays(
    store: MemoryStore, llm_server: FakeLLMServer
) -> None:
    session = session_on(store, llm_server)
    [user_note] = user_remember(store, PEANUTS, session.settings).ids  # the user's own pinned note
    llm_server.script = [[{"name": "remember", "arguments": {"text": SESAME, "replaces": user_note}}], "Updated."]
    first = session.turn("she is allergic to sesame too")
    run(first)
    [replacing] = first.calls
    newer = replacing.ids[0]
    # The pin moved on with the note, and both the model and the user are told.
    assert "pinned" in replacing.result and replacing.changed is not None and "pinned" in replacing.changed
    assert superseded(store, user_note) == newer
    # The model now stores the first note's own words, replacing the newer note: a circle.
    llm_server.script = [[{"name": "remember", "arguments": {"text": PEANUTS, "replaces": newer}}], "Sorry."]
    second = session.turn("actually, only peanuts")
    run(second)
    [circle] = second.calls
    assert circle.error is not None and "circle" in circle.error and circle.changed is None
    assert superseded(store, newer) is None and superseded(store, user_note) == newer
    block = build_wake(session.settings, store)
    assert block.pinned_ids == [newer] and SESAME in block.text()
    assert [i for i, _ in pins(store)] == [newer]
    sent = session_on(store, llm_server).turn("what do you know about Ana?").prepare().messages
    assert any(SESAME in str(m["content"]) for m in sent)  # the next thread's model is given the pinned note


def test_a_longer_circle_and_a_note_replacing_itself_are_refused(
    store: MemoryStore, llm_server: FakeLLMServer
) -> None:
    session = session_on(store, llm_server)
    [a] = call(session, "remember", text="Note A about the boat.").ids
    [b] = call(session, "remember", text="Note B about the boat.", replaces=a).ids
    [c] = call(session, "remember", text="Note C about the boat.", replaces=b).ids
    closing = call(session, "remember", text="Note A about the boat.", replaces=c)
    assert closing.error is not None and "circle" in closing.error
    itself = call(session, "remember", text="Note C about the boat.", replaces=c)
    assert itself.error is not None and "itself" in itself.error
    # A note already replaced is not replaced again (that would fork the chain): the newest is named.
    again = call(session, "remember", text="Note D about the boat.", replaces=a)
    assert again.error is not None and "already replaced" in again.error
    assert [superseded(store, i) for i in (a, b, c)] == [b, c, None]
    assert store.count("document") == 3  # nothing stored by a refused call


def test_storing_the_words_of_a_replaced_note_says_so_instead_of_already_remembered(
    store: MemoryStore, llm_server: FakeLLMServer
) -> None:
    session = session_on(store, llm_server)
    old, new = replaced_note(session)
    again = call(session, "remember", text=PEANUTS)
    assert again.error is None and "Already remembered" not in again.result
    assert "replaced by the newer note" in again.result and "Nothing was stored" in again.result and again.changed is None
    assert superseded(store, old) == new


def test_the_users_remember_of_a_replaced_notes_words_brings_it_back_and_says_so(
    store: MemoryStore, llm_server: FakeLLMServer
) -> None:
    session = session_on(store, llm_server)
    old, new = replaced_note(session)
    said = run_command(session, f"/remember {PEANUTS}").text
    assert "Remembered and pinned" in said and "given to the model again" in said
    assert superseded(store, old) is None and superseded(store, new) is None
    block = build_wake(session.settings, store)
    assert old in block.pinned_ids and PEANUTS in block.text()


@pytest.mark.parametrize("key", [PINNED_KEY, SUPERSEDED_KEY, SHORTENED_KEY])
def test_an_mcp_client_cannot_pin_or_mark_replaced_through_a_saves_metadata(key: str) -> None:
    from ocat.mcp_server.tools import checked_metadata

    with pytest.raises(UsageError, match="set by ocat itself"):
        checked_metadata({key: "doc-0123456789abcdef-0"})


def test_pinning_a_replaced_note_gives_it_to_the_model(store: MemoryStore, llm_server: FakeLLMServer) -> None:
    session = session_on(store, llm_server)
    old, _new = replaced_note(session)
    said = run_command(session, f"/pin {old}").text
    assert "the model is given it in every thread" in said and superseded(store, old) is None
    assert old in build_wake(session.settings, store).pinned_ids


def test_deleting_the_newer_note_gives_the_older_one_again_with_its_pin(
    store: MemoryStore, llm_server: FakeLLMServer
) -> None:
    session = session_on(store, llm_server)
    [user_note] = user_remember(store, PEANUTS, session.settings).ids
    [newer] = call(session, "remember", text=SESAME, replaces=user_note).ids
    run_command(session, f"/vdelete {newer} --yes")  # "/vdelete ID undoes it" (docs/configuration.md)
    assert store.get(newer) is None and superseded(store, user_note) is None
    block = build_wake(session.settings, store)
    assert block.pinned_ids == [user_note] and PEANUTS in block.text()


# -- B13: many calls in one step, many notes in one turn -----------------------------------------


def test_one_step_of_many_remember_calls_runs_only_the_caps(store: MemoryStore, llm_server: FakeLLMServer) -> None:
    asked = [{"name": "remember", "arguments": {"text": f"Fact number {n} about the garden."}} for n in range(40)]
    llm_server.script = [asked, "Stored what I could."]
    session = session_on(store, llm_server, **{"tools.max_calls_per_step": 12, "memory.max_notes_per_turn": 5})
    turn = session.turn("remember all of these")
    run(turn)
    assert turn.text == "Stored what I could." and store.count("document") == 5
    results = [m for m in llm_server.requests[-1]["messages"] if m["role"] == "tool"]
    assert len(results) == 40  # every call the model made is answered, as providers require
    assert all("at most 5 notes per turn" in m["content"] for m in results[5:12])
    assert all(m["content"] == "error: at most 12 calls per step; this call was not run" for m in results[12:])
    assert len(turn.calls) == 12 and any("28" in note and "max_calls_per_step" in note for note in turn.tool_notes)
    exchange = turn.finish()
    assert turn.stored and len(exchange.tool_calls) == 12


def test_the_caps_have_sane_defaults(store: MemoryStore, llm_server: FakeLLMServer) -> None:
    settings = session_on(store, llm_server).settings
    assert 1 <= settings.memory.max_notes_per_turn <= settings.tools.max_calls_per_step <= 50


# -- bad arguments are tool errors naming the argument -------------------------------------------


def test_a_date_out_of_range_is_a_tool_error_naming_the_argument(
    store: MemoryStore, llm_server: FakeLLMServer
) -> None:
    session = session_on(store, llm_server)
    for name, value in (("after", "0001-01-01"), ("before", "9999-12-31T23:59:59"), ("after", "1066-10-14")):
        failed = call(session, "search_memory", query="boat", **{name: value})
        assert failed.error is not None and failed.error.startswith(f"{name} ") and "unexpectedly" not in failed.error
    backwards = call(session, "search_memory", query="boat", after="2026-03-01", before="2026-02-01")
    assert backwards.error is not None and "after" in backwards.error and "before" in backwards.error


def test_an_id_of_a_million_characters_is_a_tool_error_naming_the_argument(
    store: MemoryStore, llm_server: FakeLLMServer
) -> None:
    session = session_on(store, llm_server)
    huge = "a" * 1_000_000
    for name, arguments in (("thread", {"query": "boat", "thread": huge}),):
        failed = call(session, "search_memory", **arguments)
        assert failed.error is not None and failed.error.startswith(f"{name} is 1,000,000 characters")
    for name in ("id", "around"):
        failed = call(session, "read_thread", **{"id": "x", name: huge})
        assert failed.error is not None and failed.error.startswith(f"{name} is 1,000,000 characters")
    failed = call(session, "remember", text="A boat.", replaces=huge)
    assert failed.error is not None and failed.error.startswith("replaces is 1,000,000 characters")
    assert store.count("document") == 0


def test_a_thread_id_too_long_for_the_index_is_one_plain_error_in_every_face(
    store: MemoryStore, llm_server: FakeLLMServer
) -> None:
    store.add_exchanges([Exchange(user_prompt="Which ferry?", assistant_response="The 9:10.", thread_id="t" * 300,
                                  session_id="s", exchange_id="e1", timestamp=1_770_000_000.0)])
    assert resolve_thread(store, "t" * 300) == "t" * 300  # an imported thread's long id is still found whole
    with pytest.raises(UsageError) as refused:
        resolve_thread(store, "t" * 1_000_000)  # was: SQLite's "LIKE or GLOB pattern too complex"
    assert str(refused.value).startswith("no thread with an id starting") and len(str(refused.value)) < 200
