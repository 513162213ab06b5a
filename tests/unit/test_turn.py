"""The chat turn, written once (ocat.chat.turn): its steps, what it holds, and that no face writes it again."""

from __future__ import annotations

import ast
import asyncio
from typing import AsyncIterator

import pytest

from ocat.config.loading import load_settings
from ocat.errors import ProviderError
from ocat.memory import MemoryStore
from ocat.chat.session import ChatSession
from ocat.chat.turn import TurnError, TurnState
from tests.support.paths import REPO

OCAT = REPO / "ocat"


def dummy_session(store: MemoryStore) -> ChatSession:
    session = ChatSession(load_settings(env={}, overrides={"vector_store.chat_window": 1}), store=store)
    return session


def test_a_turn_recalls_answers_and_records_with_its_memories(store: MemoryStore) -> None:
    session = dummy_session(store)
    remembered = session.record("my bike is a red gazelle", "nice bike", []).exchange
    session.new_thread()
    session.dummy = True  # the deterministic answer; memory is still searched
    turn = session.turn("what colour is my bike")
    assert turn.state is TurnState.NEW
    assert [m.id for m in turn.recall()] == [remembered.exchange_id]
    assert turn.state is TurnState.RECALLED
    text = asyncio.run(turn.answer())
    assert text.startswith("[dummy] You said: what colour is my bike") and turn.text == text
    assert turn.state is TurnState.ANSWERED and turn.usage is not None
    assert turn.first_piece_at is not None and turn.answered_at is not None and turn.elapsed() >= 0
    exchange = turn.finish()
    assert turn.state is TurnState.FINISHED and turn.exchange is exchange
    assert exchange.prior_exchange_ids == (remembered.exchange_id,)
    assert session.history[-1] is exchange
    assert not turn.stored  # dummy mode stores nothing


def test_a_real_turn_is_stored_and_says_so(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    session = dummy_session(store)

    class Answer:
        usage = None
        tool_calls: list[object] = []

        async def __aiter__(self) -> AsyncIterator[str]:
            for piece in ("Quartz", " it is."):
                yield piece

    monkeypatch.setattr("ocat.llm.stream", lambda messages, settings, dummy=False, tools=None: Answer())
    turn = session.turn("which counter top?")
    asyncio.run(turn.answer())  # iterating recalls and prepares first
    exchange = turn.finish()
    assert turn.stored and store.get(exchange.exchange_id).assistant_response == "Quartz it is."


def test_a_cancelled_or_failed_turn_records_nothing(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    session = dummy_session(store)
    cancelled = session.turn("never mind")
    cancelled.recall()
    cancelled.cancel()
    assert cancelled.state is TurnState.CANCELLED
    with pytest.raises(TurnError):
        cancelled.finish()

    class Failing:
        usage = None
        tool_calls: list[object] = []

        async def __aiter__(self) -> AsyncIterator[str]:
            yield "half an"
            raise ProviderError("the provider hung up")

    monkeypatch.setattr("ocat.llm.stream", lambda messages, settings, dummy=False, tools=None: Failing())
    failed = session.turn("tell me everything")
    with pytest.raises(ProviderError):
        asyncio.run(failed.answer())
    assert failed.state is TurnState.FAILED and failed.text == "half an"
    assert isinstance(failed.error, ProviderError)
    with pytest.raises(TurnError):
        failed.finish()
    assert store.count("exchange") == 0 and session.history == []


def test_steps_out_of_order_are_refused(store: MemoryStore) -> None:
    turn = dummy_session(store).turn("hi")
    with pytest.raises(TurnError, match="this turn is new, not answered"):
        turn.finish()
    turn.recall()
    with pytest.raises(TurnError, match="recalled, not new"):
        turn.recall()


def _calls_on(tree: ast.AST, owner: str) -> list[str]:
    """The methods called on `self.<owner>` in `tree`, one entry per call site."""
    return [node.func.attr for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == owner
            and isinstance(node.func.value.value, ast.Name) and node.func.value.value.id == "self"]


def test_the_turn_is_given_its_collaborators_and_calls_each_once() -> None:
    """The turn never reaches back into the session: it is handed memory, the model and the tools,
    and each step calls its collaborator once (recall, the model's stream, the tools offered, and the
    box only when the model calls a tool)."""
    source = (OCAT / "chat" / "turn.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "ocat.chat.session" not in imported and "self.session." not in source
    assert sorted(_calls_on(tree, "session_memory")) == ["hold", "keep", "recall"]
    assert sorted(_calls_on(tree, "model")) == ["stream", "token_limit"]
    assert sorted(_calls_on(tree, "tools")) == ["box", "stray_news"]
    handed = [node for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "offered"
              and isinstance(node.value, ast.Attribute) and node.value.attr == "tools"]
    assert len(handed) == 1  # the tools offered: asked once (handed to a thread)


def test_no_face_calls_a_turn_s_steps_on_the_session() -> None:
    """The turn is written once: the session has no step of its own to call (no relay), and no
    face (nor command) calls one on it."""
    relays = {"recall", "build_request", "prepare", "stream", "answered", "remember", "toolbox", "wake_block"}
    assert not [name for name in relays if hasattr(ChatSession, name)]
    for path in OCAT.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        called = [node.func.attr for node in ast.walk(tree)
                  if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in relays
                  and isinstance(node.func.value, ast.Name) and node.func.value.id == "session"]
        assert not called, (path, called)


def test_consent_is_given_when_the_session_is_made_never_set_on_it_after() -> None:
    """A face gives the session its way to ask (`ChatSession(..., ask=)`), as llm passes `before_call`;
    no module reaches into a session to set `consent.ask` once it is built."""
    for path in OCAT.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        set_after = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Assign)
                     for target in node.targets if isinstance(target, ast.Attribute) and target.attr == "ask"
                     and isinstance(target.value, ast.Attribute) and target.value.attr == "consent"]
        assert not set_after, (path, set_after)
