"""ChatSession: recall before a turn, history sent, exchanges recorded with their memory ids."""

from __future__ import annotations

import asyncio

from ocat.config.loading import load_settings
from ocat.memory import MemoryStore
from ocat.chat.session import ChatSession


def session_on(store: MemoryStore, **overrides: object) -> ChatSession:
    settings = load_settings(
        env={},
        overrides={"vector_store.chat_window": 1, **overrides},
    )
    return ChatSession(settings, store=store)


def test_recorded_exchanges_carry_the_ids_of_the_memories_used(store: MemoryStore) -> None:
    first = session_on(store)
    remembered = first.record("my bike is a red gazelle", "nice bike", []).exchange
    later = session_on(store)
    memories = later.turn("what colour is my bike").recall()
    assert [m.id for m in memories] == [remembered.exchange_id]
    exchange = later.record("what colour is my bike", "red", memories).exchange
    stored = store.get(exchange.exchange_id)
    assert stored.prior_exchange_ids == (remembered.exchange_id,)
    assert stored.thread_id == later.thread_id and stored.session_id == later.session_id
    assert stored.thread_id != first.thread_id


def test_turns_beyond_the_chat_window_can_be_recalled_but_recent_ones_are_not(store: MemoryStore) -> None:
    session = session_on(store)
    old = session.record("the wifi password is hunter2", "noted", []).exchange
    recent = session.record("the printer is on floor two", "noted", []).exchange
    ids = {m.id for m in session.turn("wifi password printer").recall()}
    assert old.exchange_id in ids  # out of the window: only memory can bring it back
    assert recent.exchange_id not in ids  # in the window: already sent as history
    messages = session.turn("next").prepare().messages
    assert [m["content"] for m in messages if m["role"] == "user"] == ["the printer is on floor two", "next"]


def test_dummy_mode_streams_a_deterministic_answer_and_stores_nothing(store: MemoryStore) -> None:
    session = session_on(store)
    session.dummy = True

    async def collect() -> str:
        return await session.turn("hello").answer()

    answer = asyncio.run(collect())
    assert answer.startswith("[dummy] You said: hello")
    session.record("hello", answer, [])
    assert store.count("exchange") == 0


def test_a_store_failure_turns_memory_off_without_raising(store: MemoryStore) -> None:
    session = session_on(store)

    def broken(*args: object, **kwargs: object) -> None:
        from ocat.errors import StoreError

        raise StoreError("disk on fire")

    # The store stops answering altogether (a write that fails while it answers keeps memory
    # on: tests/unit/test_trust_big_prompt.py).
    store.add_exchanges = broken  # type: ignore[method-assign]
    store.count = broken  # type: ignore[method-assign,assignment]
    session.record("hi", "hello", [])
    assert session.session_memory.on is False and "disk on fire" in (session.session_memory.error or "")
    assert len(session.history) == 1


def test_a_follow_up_finds_memory_through_the_conversation_so_far(store: MemoryStore) -> None:
    earlier = session_on(store)
    remembered = earlier.record("billing ledger database choice", "postgresql", []).exchange
    now = session_on(store)
    assert now.turn("which one was it?").recall() == []  # the follow-up alone says nothing
    now.record("remind me of the billing ledger database choice", "let me look", [])
    follow_up = now.turn("which one was it?").recall()
    assert [m.id for m in follow_up] == [remembered.exchange_id]


def test_retrieval_queries_keep_the_new_prompt_on_its_own() -> None:
    from ocat.chat.messages import retrieval_queries
    from ocat.records import Exchange

    history = [Exchange(user_prompt=f"p{i}", assistant_response="r", thread_id="t", session_id="s") for i in range(4)]
    assert retrieval_queries("new", [], 3) == ["new"]
    assert retrieval_queries("new", history, 0) == ["new"]
    assert retrieval_queries("new", history, 2) == ["new", "p2\np3\nnew"]


def test_history_is_trimmed_to_the_model_window_oldest_first(store: MemoryStore) -> None:
    # A model litellm does not know gets the fallback window (8192 tokens, less 1024 for the answer).
    session = session_on(store, **{"vector_store.chat_window": 50, "llm.model": "openai/unknown-local-model"})
    for index in range(20):
        session.record(f"question {index} " + "word " * 500, f"answer {index}", [])
    messages = session.turn("the newest prompt").prepare().messages
    sent = [m["content"].split()[1] for m in messages if m["role"] == "user"][:-1]
    assert sent and sent[-1] == "19" and "0" not in sent  # the newest kept, the oldest dropped
    assert 10 <= len(sent) < 20
    from ocat.text.tokens import count_tokens

    assert sum(count_tokens(m["content"]) for m in messages) <= 8192 - 1024
    assert messages[-1] == {"role": "user", "content": "the newest prompt"}


def test_a_larger_answer_reserve_leaves_less_history(store: MemoryStore) -> None:
    def sent_with(max_tokens: int | None) -> int:
        session = session_on(store, **{"vector_store.chat_window": 50, "llm.model": "openai/unknown-local-model",
                                       "llm.max_tokens": max_tokens})
        for index in range(20):
            session.record(f"question {index} " + "word " * 500, "ok", [])
        return sum(1 for m in session.turn("next").prepare().messages if m["role"] == "user")

    assert sent_with(6000) < sent_with(None)
