"""Issue 30: the model uses memory through tools, in the turn (ocat.chat.turn): search_memory,
read_thread and remember, called as providers stream calls (several per step, arguments in
pieces), bad input turned into tool errors, a model that calls for ever stopped, a model that
refuses tools asked again without them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from ocat.config.loading import load_settings
from ocat.memory import MemoryStore
from ocat.records import SUPERSEDED_KEY, Exchange
from ocat.chat.outcomes import TextPiece, ToolFinished, ToolStarted, TurnEvent
from ocat.chat.session import ChatSession
from ocat.tools.calls import CallState
from ocat.chat.turn import Turn
from tests.support.fakes import FakeLLMServer


def session_on(store: MemoryStore, server: FakeLLMServer, **overrides: Any) -> ChatSession:
    settings = load_settings(env={}, overrides={
        "llm.model": "openai/fake-model", "llm.api_base": server.api_base, "llm.api_key": "sk-test", **overrides})
    return ChatSession(settings, store=store)


def kitchen(store: MemoryStore) -> list[Exchange]:
    exchanges = [
        Exchange(user_prompt="What counter top for the kitchen?", assistant_response="Quartz: about 18,000 euros.",
                 thread_id="kitchen-thread", session_id="s", exchange_id="k1", timestamp=1_760_000_000.0),
        Exchange(user_prompt="Who fits the cabinets?", assistant_response="Berg & Sons fit the cabinets.",
                 thread_id="kitchen-thread", session_id="s", exchange_id="k2", timestamp=1_760_000_100.0),
        Exchange(user_prompt="Which ferry to Porto?", assistant_response="The 9:10 from the harbour.",
                 thread_id="trip-thread", session_id="s", exchange_id="t1", timestamp=1_770_000_000.0),
    ]
    store.add_exchanges(exchanges)
    return exchanges


def seen(event: TurnEvent) -> Any:
    """An event as the tests compare it: a piece's text, or a call's name and state as it was yielded."""
    match event:
        case TextPiece(text):
            return text
        case ToolStarted(call) | ToolFinished(call):
            return (call.name, call.state)


def run(turn: Turn) -> list[Any]:
    async def go() -> list[Any]:
        return [seen(event) async for event in turn]

    return asyncio.run(go())


def test_a_search_call_streamed_in_pieces_reaches_the_model_as_a_tool_result(
    store: MemoryStore, llm_server: FakeLLMServer
) -> None:
    kitchen(store)
    llm_server.script = [[{"name": "search_memory", "arguments": {"query": "cabinets fitter", "kind": "exchanges"}}],
                         "Berg & Sons fit them."]
    session = session_on(store, llm_server)
    turn = session.turn("hello again")  # nothing is injected: the model searches for itself
    events = run(turn)
    assert ("search_memory", CallState.RUNNING) in events and ("search_memory", CallState.DONE) in events
    assert turn.text == "Berg & Sons fit them." and turn.steps == 2
    [call] = turn.calls
    assert call.error is None and call.count and "k2" in call.ids and call.ms is not None
    assert "Berg & Sons fit the cabinets." in call.result, call.result.splitlines()
    first, second = llm_server.requests[-2:]
    assert {t["function"]["name"] for t in first["tools"]} == {"search_memory", "read_thread", "remember"}
    tool_messages = [m for m in second["messages"] if m["role"] == "tool"]
    assert tool_messages[0]["tool_call_id"] == call.id and "Berg & Sons" in tool_messages[0]["content"]
    exchange = turn.finish()
    assert turn.stored and exchange.tool_calls[0].name == "search_memory" and "k2" in exchange.tool_calls[0].ids
    assert store.get(exchange.exchange_id).tool_calls == exchange.tool_calls  # type: ignore[union-attr]


def test_a_call_is_started_once_and_its_time_runs_from_the_line_shown(
    store: MemoryStore, llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The turn starts a call when it shows it (ToolStarted); running it does not start it again."""
    ticks = iter(range(1000))
    monkeypatch.setattr("ocat.tools.calls.clock", lambda: float(next(ticks)))
    kitchen(store)
    llm_server.script = [[{"name": "search_memory", "arguments": {"query": "cabinets"}}], "Berg."]
    turn = session_on(store, llm_server).turn("hello again")
    started: list[float | None] = []

    async def go() -> None:
        async for event in turn:
            if isinstance(event, (ToolStarted, ToolFinished)):
                started.append(event.call.started)

    asyncio.run(go())
    assert len(started) == 2 and started[0] is not None and started[0] == started[1]


def test_several_calls_in_one_step_and_read_thread_oldest_first(store: MemoryStore, llm_server: FakeLLMServer) -> None:
    kitchen(store)
    llm_server.script = [[{"name": "read_thread", "arguments": {"id": "kitchen-th"}},
                          {"name": "search_memory", "arguments": {"query": "ferry", "after": "2026-01-01"}}],
                         "Done."]
    turn = session_on(store, llm_server).turn("summarise the kitchen thread")
    run(turn)
    read, searched = turn.calls
    assert read.ids == ("k1", "k2") and read.result.index("Quartz") < read.result.index("Berg")
    assert searched.ids == ("t1",) and "after 2026-01-01" in searched.summary


def test_bad_calls_are_tool_errors_and_the_turn_goes_on(store: MemoryStore, llm_server: FakeLLMServer) -> None:
    kitchen(store)
    llm_server.script = [[
        {"name": "search_memory", "arguments": "{not json"},
        {"name": "search_memory", "arguments": {}},
        {"name": "delete_everything", "arguments": {}},
        {"name": "remember", "arguments": {"text": "   "}},
        {"name": "remember", "arguments": {"text": "x" * 8001}},
        {"name": "search_memory", "arguments": {"query": "q", "after": "last tuesday"}},
    ], "Sorry, I could not."]
    turn = session_on(store, llm_server).turn("try things")
    run(turn)
    errors = [c.error for c in turn.calls]
    assert all(errors) and turn.text == "Sorry, I could not."
    assert "not JSON" in str(errors[0]) and "missing argument: query" in str(errors[1])
    assert "no tool 'delete_everything'" in str(errors[2]) and "empty" in str(errors[3])
    assert "8,001 characters" in str(errors[4]) and "ISO 8601" in str(errors[5])
    results = [m for m in llm_server.requests[-1]["messages"] if m["role"] == "tool"]
    assert len(results) == 6 and all(m["content"].startswith("error: ") for m in results)
    assert store.count("document") == 0


def test_a_tool_that_raises_is_one_error_line_and_logged(
    store: MemoryStore, llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ocat.tools.memory_tools as search_module  # the search_memory tool's `search`, patched where it is read

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("index exploded")

    monkeypatch.setattr(search_module, "search", broken)
    llm_server.script = [[{"name": "search_memory", "arguments": {"query": "x"}}], "Answered anyway."]
    turn = session_on(store, llm_server).turn("hello")
    run(turn)
    assert turn.text == "Answered anyway." and "RuntimeError: index exploded" in str(turn.calls[0].error)


def test_a_model_that_calls_for_ever_is_stopped_at_the_limit(store: MemoryStore, llm_server: FakeLLMServer) -> None:
    llm_server.script = [[{"name": "search_memory", "arguments": {"query": f"again {n}"}}] for n in range(20)]
    llm_server.reply = "Final answer."
    turn = session_on(store, llm_server, **{"tools.max_steps": 3}).turn("loop")
    run(turn)
    assert turn.steps == 4 and len(turn.calls) == 3 and turn.text == "Final answer."
    assert "tools" not in llm_server.requests[-1] and "3 times" in turn.tool_notes[0]


def test_a_result_over_the_budget_is_cut_with_a_note(store: MemoryStore, llm_server: FakeLLMServer) -> None:
    store.add_exchanges([Exchange(user_prompt=f"pump question {n}", assistant_response="pump " * 400,
                                  thread_id=f"t{n}", session_id="s", exchange_id=f"p{n}", timestamp=1.0e9 + n)
                         for n in range(10)])
    llm_server.script = [[{"name": "search_memory", "arguments": {"query": "pump", "limit": 10}}], "ok"]
    turn = session_on(store, llm_server, **{"tools.result_tokens": 300}).turn("pumps?")
    run(turn)
    from ocat.text.tokens import estimate_tokens

    assert estimate_tokens(turn.calls[0].result) <= 300


def test_results_share_the_budget_best_first_and_none_is_cut_away(store: MemoryStore,
                                                                  llm_server: FakeLLMServer) -> None:
    # Long answers full of numbers (more tokens per character than prose): each result still
    # fits, the best gets the most, and the box never has to cut the last ones away.
    store.add_exchanges([Exchange(user_prompt=f"pump pressure log {n}",
                                  assistant_response=" ".join(f"{n}.{k}bar@{k * 7}s" for k in range(600)),
                                  thread_id=f"t{n}", session_id="s", exchange_id=f"p{n}", timestamp=1.0e9 + n)
                         for n in range(5)])
    llm_server.script = [[{"name": "search_memory", "arguments": {"query": "pump pressure log", "limit": 5}}], "ok"]
    turn = session_on(store, llm_server).turn("pumps?")
    run(turn)
    from ocat.text.tokens import estimate_tokens

    result = turn.calls[0].result
    assert estimate_tokens(result) <= 1500 and "cut to stay within" not in result
    bodies = result.split("\n\n")[1:]
    assert len(bodies) == 5 and len(bodies[0]) > 2 * len(bodies[-1])


def test_remember_stores_a_model_note_and_replaces_marks_the_older_one(
    store: MemoryStore, llm_server: FakeLLMServer
) -> None:
    from ocat.operations.wake import pin

    llm_server.script = [[{"name": "remember", "arguments": {"text": "Ana is allergic to peanuts."}}], "Noted."]
    session = session_on(store, llm_server)
    first = session.turn("remember that Ana is allergic to peanuts")
    run(first)
    [call] = first.calls
    assert call.changed and call.changed.startswith("Remembered: 'Ana is allergic to peanuts.'")
    old_id = call.ids[0]
    assert store.get(old_id).metadata["source"] == "model"  # type: ignore[union-attr]
    pin(store, old_id)
    llm_server.script = [[{"name": "remember", "arguments": {"text": "Ana is allergic to peanuts and sesame.",
                                                             "replaces": old_id[:12]}}], "Updated."]
    second = session.turn("she is allergic to sesame too")
    run(second)
    new_id = second.calls[0].ids[0]
    assert store.get(old_id).metadata[SUPERSEDED_KEY] == new_id  # type: ignore[union-attr]
    # A certain link between the two versions, made by the model, with what changed.
    from ocat import memory

    chain = memory.versions(store, new_id)
    assert [v.record_id for v in chain] == [old_id, new_id]
    assert (chain[0].how, chain[0].evidence) == ("model", "… -> and sesame")
    block = __import__("ocat.operations.wake", fromlist=["build_wake"]).build_wake(session.settings, store)
    assert "sesame" in block.text() and block.pinned_ids == [new_id]
    # The old note is kept, and a search says it was replaced; retrieval gives the newer one.
    from ocat.operations.search import search

    found = search([store], "Ana allergic peanuts", session.settings.vector_store)
    reasons = {f.hit.id: f.why for f in found.found}
    assert reasons[old_id].startswith("replaced by") and not next(f for f in found.found if f.hit.id == old_id).hit.admitted


def test_remember_can_be_turned_off_and_no_tool_deletes(store: MemoryStore, llm_server: FakeLLMServer) -> None:
    session = session_on(store, llm_server, **{"memory.model_may_remember": False})
    box = session.tools().box(set())
    assert box is not None and set(box.specs) == {"search_memory", "read_thread"}
    full = session_on(store, llm_server).tools().box(set())
    assert full is not None and not any("delete" in name or "forget" in name for name in full.specs)


def test_a_server_that_refuses_tools_is_asked_again_without_and_remembered(
    store: MemoryStore, llm_server: FakeLLMServer, isolated_home: Path
) -> None:
    llm_server.refuse_tools = True
    llm_server.reply = "Plain answer."
    session = session_on(store, llm_server)
    turn = session.turn("hello")
    run(turn)
    assert turn.text == "Plain answer." and "does not take tools" in turn.tool_notes[0]
    assert "tools" in llm_server.requests[-2] and "tools" not in llm_server.requests[-1]
    state = json.loads((isolated_home / ".local/state/ocat/tools.json").read_text())
    assert state == {"refused": [{"model": "openai/fake-model", "api_base": llm_server.api_base}]}
    later = session_on(store, llm_server).turn("again")  # a new run knows: no tools offered, nothing said
    run(later)
    assert later.tool_notes == [] and "tools" not in llm_server.requests[-1]


# Real providers' words, and what each means for a request that offered tools (B10): the model
# takes none, one tool's definition is refused (index or name), or neither (the turn fails).
OFFERED = [{"type": "function", "function": {"name": name, "parameters": {}}}
           for name in ("search_memory", "read_thread", "fx__lookup")]


@pytest.mark.parametrize(("text", "param", "refusal", "tool"), [
    # Ollama, both APIs
    ("Error code: 400 - registry.ollama.ai/library/gemma2:2b does not support tools", None, True, None),
    ('{"error":"stablelm2:latest does not support tools"}', None, True, None),
    # OpenAI, a model without tools (o1-mini)
    ("Error code: 400 - Unsupported parameter: 'tools' is not supported with this model.", "tools", True, None),
    # DeepSeek's reasoner
    ("Error code: 400 - deepseek-reasoner does not support Function Calling", None, True, None),
    # vLLM started without its tool parser
    ('Error code: 400 - "auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
     None, True, None),
    # llama.cpp's server without --jinja (a 500), and an older one
    ("Error code: 500 - tools param requires --jinja flag", None, True, None),
    ("Error code: 500 - Unsupported param: tools", None, True, None),
    # litellm refusing the parameter for a provider
    ("litellm.UnsupportedParamsError: ollama does not support parameters: ['tools'], for model=phi", None, True, None),
    # OpenAI's schema error naming an MCP tool: that tool only, never a refusal
    ("Error code: 400 - Invalid schema for function 'fx__lookup': In context=(), object schema missing properties.",
     "tools[2].function.parameters", False, "fx__lookup"),
    # ... through litellm, the param in the text
    ("litellm.BadRequestError: OpenAIException - Invalid schema for function 'read_thread': In context=('properties', "
     "'x'), 'oneOf' is not supported. {'param': 'tools[1].function.parameters'}", None, False, "read_thread"),
    # Anthropic's and Gemini's, by index
    ("litellm.BadRequestError: AnthropicException - tools.2.custom.input_schema: JSON schema is invalid. It must "
     "match JSON Schema draft 2020-12", None, False, "fx__lookup"),
    ("litellm.BadRequestError: VertexAIException - Invalid JSON payload received. Unknown name \"additionalProperties\" "
     "at 'tools[0].function_declarations[1].parameters': Cannot find field.", None, False, "read_thread"),
    # OpenAI's context-length error counts tokens "in the functions": neither
    ("Error code: 400 - This model's maximum context length is 128000 tokens. However, your messages resulted in "
     "130412 tokens (including 912 in the functions). Please reduce the length of the messages or functions.",
     "messages", False, None),
    # A rate limit, a wrong key: neither
    ("Error code: 429 - Rate limit reached for gpt-4o in organization org-x on tokens per min", None, False, None),
    ("Error code: 401 - Incorrect API key provided: sk-abc. You can find your API key at ...", None, False, None),
])
def test_what_a_providers_error_says_about_tools(text: str, param: str | None, refusal: bool, tool: str | None) -> None:
    from ocat.llm.tool_errors import refused_tool, refuses_tools

    assert refused_tool(text, param, OFFERED) == tool
    assert tool is not None or refuses_tools(text) == refusal


def test_a_schema_error_drops_that_tool_for_the_session_and_names_it(
    store: MemoryStore, llm_server: FakeLLMServer, isolated_home: Path
) -> None:
    llm_server.refuse_tool = "read_thread"
    llm_server.reply = "Answered."
    session = session_on(store, llm_server)
    turn = session.turn("hello")
    run(turn)
    assert turn.text == "Answered."
    assert len(turn.tool_notes) == 1 and "refused the tool read_thread (" in turn.tool_notes[0]
    offered = [[t["function"]["name"] for t in r.get("tools", [])] for r in llm_server.requests]
    assert "read_thread" in offered[0] and "read_thread" not in offered[1] and "search_memory" in offered[1]
    assert not (isolated_home / ".local/state/ocat/tools.json").exists()  # the model takes tools
    later = session.turn("again")
    run(later)
    assert later.tool_notes == [] and "search_memory" in [t["function"]["name"] for t in llm_server.requests[-1]["tools"]]
    assert "read_thread" not in [t["function"]["name"] for t in llm_server.requests[-1]["tools"]]
    assert "Offered again: read_thread" in session.refusals.reset(session.settings.llm)
    box = session.tools().box(set())
    assert box is not None and "read_thread" in box.specs


def test_a_context_length_error_naming_functions_is_the_turns_failure_not_a_refusal(
    store: MemoryStore, llm_server: FakeLLMServer, isolated_home: Path
) -> None:
    llm_server.error_with_tools = ("This model's maximum context length is 8192 tokens. However, your messages resulted "
                                   "in 9000 tokens (including 400 in the functions). Please reduce the length of the "
                                   "messages or functions.")
    session = session_on(store, llm_server)
    turn = session.turn("hello")
    with pytest.raises(Exception, match="maximum context length"):
        run(turn)
    assert len(llm_server.requests) == 1 and turn.tool_notes == []
    assert not (isolated_home / ".local/state/ocat/tools.json").exists()
    assert session_on(store, llm_server).tools().box(set()) is not None  # tools are still offered


def test_a_refusal_is_kept_per_model_and_server_and_tools_reset_forgets_it(
    store: MemoryStore, llm_server: FakeLLMServer, isolated_home: Path
) -> None:
    llm_server.refuse_tools = True
    session = session_on(store, llm_server)
    run(session.turn("hello"))
    assert session_on(store, llm_server).tools().box(set()) is None
    elsewhere = session_on(store, llm_server, **{"llm.api_base": llm_server.api_base.replace("127.0.0.1", "localhost")})
    assert elsewhere.tools().box(set()) is not None  # another server with the same model name is asked
    from ocat.commands.registry import run_command

    said = run_command(session, "/tools reset").text
    assert "Forgot that openai/fake-model at" in said and session.tools().box(set()) is not None
    assert session_on(store, llm_server).tools().box(set()) is not None  # and in later runs
    assert "Nothing to reset" in run_command(session, "/tools reset").text


def test_a_search_marks_what_the_model_already_has(store: MemoryStore, llm_server: FakeLLMServer) -> None:
    kitchen(store)
    session = session_on(store, llm_server)
    box = session.tools().box({"k2"})
    assert box is not None
    from ocat.tools.calls import ToolCall

    call = box.run(ToolCall("c", "search_memory", json.dumps({"query": "who fits the cabinets", "kind": "exchanges"})))
    assert "already in your context above" in call.result and call.result.count("Berg & Sons") == 0


def test_earlier_calls_reach_the_model_compact_in_the_history(store: MemoryStore, llm_server: FakeLLMServer) -> None:
    kitchen(store)
    llm_server.script = [[{"name": "search_memory", "arguments": {"query": "ferry"}}], "The 9:10."]
    session = session_on(store, llm_server)
    first = session.turn("which ferry?")
    run(first)
    first.finish()
    turn = session.turn("and back?")
    turn.prepare()
    assert turn.request is not None
    answers = [m["content"] for m in turn.request.messages if m["role"] == "assistant"]
    assert answers and answers[-1].startswith('(tools used for this answer: search_memory {"query":"ferry"} -> 3 results [t1')


def test_the_tools_offered_are_made_once_before_the_turns_and_the_box_only_when_a_tool_is_called(
    store: MemoryStore, llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dataclasses

    import ocat.chat.turn_inputs

    asked: list[str] = []
    real = ocat.chat.turn_inputs.offer_tools
    monkeypatch.setattr(ocat.chat.turn_inputs, "offer_tools", lambda settings: asked.append("asked") or real(settings))
    session = session_on(store, llm_server)
    session.prepare_turns()  # what the chats call once memory has opened
    first = session.turn("hello")
    run(first)
    second = session.turn("again")
    run(second)
    assert asked == ["asked"] and first.box is None and second.box is None  # no tool called: no box made
    names = [[tool["function"]["name"] for tool in request["tools"]] for request in llm_server.requests]
    assert names == [["search_memory", "read_thread", "remember"]] * 2
    # What the list depends on changes (here /tools off): the next turn's list is made again.
    session.settings = dataclasses.replace(session.settings, tools=dataclasses.replace(session.settings.tools,
                                                                                       enabled="off"))
    run(session.turn("and now?"))
    assert "tools" not in llm_server.requests[-1] and asked == ["asked", "asked"]
    llm_server.script = [[{"name": "search_memory", "arguments": {"query": "kitchen"}}]]
    session.settings = dataclasses.replace(session.settings, tools=dataclasses.replace(session.settings.tools,
                                                                                       enabled="auto"))
    called = session.turn("what about the kitchen?")
    run(called)
    assert called.box is not None and [call.name for call in called.calls] == ["search_memory"]



def test_a_tool_called_after_tools_were_turned_off_is_not_run_and_the_turn_says_so(
    store: MemoryStore, llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = session_on(store, llm_server)
    llm_server.script = [[{"name": "search_memory", "arguments": {"query": "kitchen"}}]]
    turn = session.turn("what about the kitchen?")
    # Offered with the request, gone when the model's call arrives (`/tools off` meanwhile).
    monkeypatch.setattr(turn.tools, "box", lambda in_context: None)
    run(turn)
    assert turn.calls == [] and turn.box is None
    assert any("search_memory" in note and "not run" in note for note in turn.tool_notes)


def test_tools_reset_offers_tools_again_to_a_chat_that_began_with_a_kept_refusal(
    store: MemoryStore, llm_server: FakeLLMServer, isolated_home: Path
) -> None:
    from ocat.commands.registry import run_command

    llm_server.refuse_tools = True
    run(session_on(store, llm_server).turn("hello"))  # the refusal is kept for later runs
    llm_server.refuse_tools = False
    session = session_on(store, llm_server)
    run(session.turn("one"))
    assert "tools" not in llm_server.requests[-1]
    assert "Forgot that openai/fake-model" in run_command(session, "/tools reset").text
    run(session.turn("two"))
    assert "search_memory" in [tool["function"]["name"] for tool in llm_server.requests[-1]["tools"]]
