"""The chat model's check of versions (`memory.consolidate: model`): the question, the answer read,
the links it makes and undoes, what it costs, and that it is off by default (docs/memory.md,
"The model checks the links")."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ocat.chat.consolidation import Consolidator, Spent, model_judge
from ocat.config.loading import load_settings
from ocat.llm import Usage
from ocat.memory import apply_verdict, check_for, messages_for, verdict_of
from ocat.memory.consolidate import Change
from ocat.memory.storage.version_finder import newer_ids
from ocat.records import UPDATE_EVIDENCE_KEY, UPDATE_HOW_KEY, Exchange
from tests.support.fakes import FakeLLMServer, serving

DAY = 86_400.0


def exchange(prompt: str, day: float, session: str) -> Exchange:
    return Exchange(user_prompt=prompt, assistant_response="Noted.", thread_id=f"t-{session}", session_id=session,
                    timestamp=1_735_700_000.0 + day * DAY)


def stored(store: Any, exchange_id: str) -> dict[str, Any]:
    return dict(store.fetch("exchange", [exchange_id], vectors=False)["metadatas"][0] or {})


def tank_plans(store: Any) -> tuple[Exchange, Exchange]:
    """Two versions of one plan that the finder cannot link (no value of one type said differently)."""
    store.link_versions = False
    old = exchange("rainwater tank plan for the garden shed: one big underground concrete tank", 0, "s1")
    new = exchange("rainwater tank plan for the garden shed changed: two small plastic tanks above ground", 30, "s2")
    store.add_exchanges([old, new])
    return old, new


def test_the_answer_is_read_only_when_it_is_the_json_asked_for() -> None:
    fenced = '```json\n{"updates": [{"n": 2, "old": "500 mg", "new": "850 mg"}]}\n```'
    assert verdict_of(fenced, 2) == [Change(2, "500 mg -> 850 mg")]
    assert verdict_of('{"updates": []}', 3) == []
    # Numbers not shown, repeated, or not numbers are left out; a bare number counts.
    assert verdict_of('{"updates": [{"n": 7}, {"n": 1}, {"n": 1}, {"n": true}, 2]}', 2) == [
        Change(1, "(not said) -> (not said)"), Change(2, "(not said) -> (not said)")]
    for unreadable in ("yes, the first one", '{"updated": [1]}', "{not json}", ""):
        assert verdict_of(unreadable, 2) is None


def test_the_question_shows_the_earlier_versions_of_another_session(store: Any) -> None:
    old, new = tank_plans(store)
    check = check_for(store, new.exchange_id)
    assert check is not None and [e.id for e in check.earlier] == [old.exchange_id]
    asked = messages_for(check)[-1]["content"]
    assert new.user_prompt in asked and old.user_prompt in asked and '{"updates": []}' in asked
    # The first exchange of all has nothing earlier: the model is not asked.
    assert check_for(store, old.exchange_id) is None


def test_the_models_word_links_and_unlinks(store: Any) -> None:
    old, new = tank_plans(store)
    check = check_for(store, new.exchange_id)
    assert check is not None
    applied = apply_verdict(store, check, [Change(1, "one underground tank -> two tanks above ground")])
    assert applied.linked == [old.exchange_id]
    metadata = stored(store, old.exchange_id)
    assert newer_ids(metadata) == [new.exchange_id] and metadata[UPDATE_HOW_KEY] == "model"
    assert metadata[UPDATE_EVIDENCE_KEY] == "one underground tank -> two tanks above ground"


def test_a_found_link_the_model_does_not_confirm_is_undone(store: Any) -> None:
    first = exchange("metformin dose for the diabetes: 500 mg twice daily", 0, "s1")
    raised = exchange("metformin dose for the diabetes: 850 mg twice daily", 30, "s2")
    store.add_exchanges([first])
    store.add_exchanges([raised])
    assert newer_ids(stored(store, first.exchange_id)) == [raised.exchange_id]  # the finder's link
    check = check_for(store, raised.exchange_id)
    assert check is not None and any(e.found for e in check.earlier)
    applied = apply_verdict(store, check, [])
    assert applied.dropped == [first.exchange_id]
    assert newer_ids(stored(store, first.exchange_id)) == []


def test_a_certain_link_is_never_shown_to_the_model(store: Any) -> None:
    old, new = tank_plans(store)
    check = check_for(store, new.exchange_id)
    assert check is not None
    apply_verdict(store, check, [Change(1, "x -> y")])
    assert check_for(store, new.exchange_id) is None  # its one earlier version is linked for certain


def test_the_checks_run_in_the_background_and_say_what_they_cost(store: Any) -> None:
    old, new = tank_plans(store)
    heard: list[str] = []
    asked: list[list[dict[str, Any]]] = []

    def judge(messages: list[dict[str, Any]]) -> tuple[str, Usage | None]:
        asked.append(messages)
        return json.dumps({"updates": [{"n": 1, "old": "one tank", "new": "two tanks"}]}), \
            Usage(prompt_tokens=300, completion_tokens=20, cost_usd=0.0002)

    checks = Consolidator(lambda: store, judge, heard.append)
    checks.submit(new.exchange_id)
    checks.submit(old.exchange_id)  # nothing earlier: no call, no cost
    assert checks.wait(30)
    checks.close(5)
    assert len(asked) == 1
    assert newer_ids(stored(store, old.exchange_id)) == [new.exchange_id]
    assert heard == ["memory: the model checked the last exchange: it updates 1 earlier exchange "
                     "(one tank -> two tanks) · this chat's checks: 1 check, 320 tokens, $0.0002"]


def test_a_failing_check_changes_nothing_and_the_next_one_still_runs(store: Any) -> None:
    old, new = tank_plans(store)
    answers = iter([RuntimeError("the provider is down"), ("I think the first one", None),
                    ('{"updates": [{"n": 1}]}', None)])

    def judge(messages: list[dict[str, Any]]) -> tuple[str, Usage | None]:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    checks = Consolidator(lambda: store, judge)
    checks.submit(new.exchange_id)
    checks.submit(new.exchange_id)
    assert checks.wait(30)
    assert newer_ids(stored(store, old.exchange_id)) == []  # a failure and an unreadable answer: no link
    checks.submit(new.exchange_id)
    assert checks.wait(30)
    assert newer_ids(stored(store, old.exchange_id)) == [new.exchange_id]
    assert checks.spent.checks == 2  # the call that raised cost nothing known


def test_spent_words_leave_out_a_price_the_model_has_not() -> None:
    spent = Spent()
    spent.add(Usage(prompt_tokens=1000, completion_tokens=234))
    spent.add(None)
    assert spent.words() == "2 checks, 1,234 tokens"


def test_off_by_default_no_model_call_is_made(session: Any) -> None:
    with serving(FakeLLMServer(reply='{"updates": []}')) as server:
        assert session.settings.memory.consolidate == "off"
        memory = session.session_memory
        memory.store.link_versions = False
        memory.keep(exchange("rainwater tank: one underground tank", 0, "s1"))
        memory.keep(exchange("rainwater tank: two tanks above ground", 30, "s2"))
        assert memory.consolidator is None and server.requests == []


@pytest.mark.parametrize("answer, linked", [('{"updates": [{"n": 1, "old": "one", "new": "two"}]}', True),
                                            ('{"updates": []}', False)])
def test_a_chat_with_consolidate_model_asks_its_own_model(tmp_path: Any, store: Any, answer: str, linked: bool) -> None:
    """The chat's model, at its api_base, with no system prompt of the chat's: its answer is applied."""
    from ocat.chat.session import ChatSession

    with serving(FakeLLMServer(reply=answer)) as server:
        config = tmp_path / "config.yaml"
        config.write_text(f"llm:\n  model: openai/fake-model\n  api_base: {server.api_base}\n"
                          "  system_prompt: You are a pirate.\nmemory:\n  consolidate: model\n", encoding="utf-8")
        chat = ChatSession(load_settings(str(config), env={}), store=store)
        memory = chat.session_memory
        store.link_versions = False
        old = exchange("rainwater tank plan: one underground concrete tank by the shed", 0, "s1")
        new = exchange("rainwater tank plan changed: two plastic tanks above ground by the shed", 30, "s2")
        memory.keep(old)
        memory.keep(new)
        assert memory.consolidator is not None and memory.consolidator.wait(30)
        assert len(server.requests) == 1
        sent = server.requests[0]
        assert sent["temperature"] == 0.0 and "pirate" not in json.dumps(sent["messages"])
        assert (newer_ids(stored(store, old.exchange_id)) == [new.exchange_id]) is linked
        memory.consolidator.close(5)


def test_model_judge_returns_the_answer_and_its_usage() -> None:
    with serving(FakeLLMServer(reply='{"updates": []}')) as server:
        settings = load_settings(env={"OCAT_LLM_MODEL": "openai/fake-model", "OCAT_LLM_API_BASE": server.api_base})
        answer, usage = model_judge(settings.llm)([{"role": "user", "content": "which?"}])
    assert answer == '{"updates": []}' and usage is not None and usage.total_tokens >= 0


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_full_screen_chat_shows_a_check_on_a_line_of_its_own(llm_server: FakeLLMServer) -> None:
    from ocat.ui.widgets import NoticeMessage
    from tests.support.pilot import make_app, memory_ready, send, wait_for

    first = make_app(llm_server)
    async with first.run_test(size=(100, 30)) as pilot:
        await memory_ready(first, pilot)
        await send(first, pilot, "Rainwater plan: one 5,000 L underground concrete tank next to the shed.")
    llm_server.script = ["Two tanks it is.", '{"updates": [{"n": 1, "old": "one underground tank", "new": "two tanks"}]}']
    second = make_app(llm_server, **{"memory.consolidate": "model"})
    async with second.run_test(size=(100, 30)) as pilot:
        await memory_ready(second, pilot)
        await send(second, pilot, "Changed my mind on the rainwater: two 3,000 L tanks above ground next to the shed.")

        def told() -> list[str]:
            return [str(w.render()) for w in second.query(NoticeMessage) if "the model checked" in str(w.render())]

        await wait_for(pilot, lambda: bool(told()), "the check's line", seconds=30)
        assert "it updates 1 earlier exchange (one underground tank -> two tanks)" in told()[0]
        assert "this chat's checks: 1 check" in told()[0]
    assert len(llm_server.requests) == 3 and "Earlier messages" in llm_server.requests[-1]["messages"][-1]["content"]
