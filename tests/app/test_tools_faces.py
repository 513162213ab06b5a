"""Issue 30: the model's tool calls, in every face: a line per call under the answer in the
full-screen chat (expandable; expanded with /showcontext on), Esc during a call, a line per call
in line mode, `--ask --output json`, /retry, and calls that travel with the exchange through
export and import."""

from __future__ import annotations

import io
import json
import threading
from contextlib import suppress
from typing import Any

import pytest
from textual.worker import WorkerCancelled

from ocat.memory import MemoryStore
from ocat.memory.storage.export_import import export_memory, import_memory
from ocat.records import Exchange
from ocat.ui.tool_calls import ToolCallView
from ocat.ui.widgets import NoticeMessage
from tests.support.cli import Cli
from tests.support.fakes import FakeLLMServer
from tests.support.pilot import make_app, memory_ready, send, wait_for
from tests.cli.test_repl import chat_args

FERRY = Exchange(user_prompt="Which ferry do we take to Porto?", assistant_response="The 9:10 from the harbour.",
                 thread_id="0d5e1a2b-trip", session_id="s", exchange_id="e1", timestamp=1_700_000_000.0)


def searching(query: str, answer: str) -> list[Any]:
    return [[{"name": "search_memory", "arguments": {"query": query}}], answer]


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["summary", "on"])
async def test_each_call_is_a_line_under_the_answer_expandable_to_its_results(
    llm_server: FakeLLMServer, mode: str
) -> None:
    llm_server.script = searching("ferry Porto", "The 9:10 from the harbour, as you said.")
    app = make_app(llm_server, **{"display.context_mode": mode})
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        assert app.session.session_memory.store is not None
        app.session.session_memory.store.add_exchange(FERRY)
        await send(app, pilot, "hi there")
        [view] = app.query(ToolCallView)
        line = str(view.title)
        assert line.startswith("searched 'ferry Porto': 1 result · ") and line.endswith(" ms")
        assert view.collapsed is (mode != "on")
        assert "The 9:10 from the harbour." in str(view.body.render())
        assert app.last_answer == "The 9:10 from the harbour, as you said."
        stored = app.session.session_memory.store.get(app.session.history[-1].exchange_id)
        assert isinstance(stored, Exchange) and stored.tool_calls[0].ids == ("e1",)


@pytest.mark.slow
@pytest.mark.anyio
async def test_remember_says_remembered_with_the_id_to_delete(llm_server: FakeLLMServer) -> None:
    llm_server.script = [[{"name": "remember", "arguments": {"text": "The user's cat is called Miso."}}], "Noted."]
    app = make_app(llm_server)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        await send(app, pilot, "my cat is called Miso")
        [view] = app.query(ToolCallView)
        assert str(view.title).startswith("Remembered: \"The user's cat is called Miso.\" (doc-")
        note_id = str(view.title).split("(")[1].split(")")[0]
        await send(app, pilot, f"/vdelete {note_id} --yes")
        await wait_for(pilot, lambda: app.session.session_memory.store is not None and app.session.session_memory.store.count("document") == 0,
                       "the note is deleted")


@pytest.mark.slow
@pytest.mark.anyio
async def test_escape_during_a_tool_call_cancels_the_turn_and_stores_nothing(
    llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ocat.tools.memory_tools as search_module  # the search_memory tool's `search`, patched where it is read

    real = search_module.search
    escaped = threading.Event()

    def slow(*args: Any, **kwargs: Any) -> Any:
        escaped.wait(30)  # the search is still under way when Esc is pressed
        return real(*args, **kwargs)

    monkeypatch.setattr(search_module, "search", slow)
    llm_server.script = searching("anything", "never shown")
    app = make_app(llm_server)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        app.query_one("PromptInput").text = "search please"  # type: ignore[attr-defined]
        await pilot.press("enter")
        await wait_for(pilot, lambda: bool(app.query(ToolCallView)), "the call starts", seconds=30)
        await pilot.press("escape")
        escaped.set()
        assert app.turn is not None
        with suppress(WorkerCancelled):
            await app.turn.wait()
        await pilot.pause()
        assert any("Cancelled" in str(w.render()) for w in app.query(NoticeMessage))
        assert app.session.session_memory.store is not None and app.session.session_memory.store.count("exchange") == 0
        assert "cancelled" in str(app.query_one(ToolCallView).title)


@pytest.mark.slow
def test_snapshot_a_turn_with_a_tool_call(snap_compare: Any, llm_server: FakeLLMServer,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import itertools

    import ocat.tools.calls as calls
    import ocat.chat.turn as turn

    ticks = itertools.count(1000.0, 0.012)  # each reading of the clock is 12 ms on: the picture never moves
    monkeypatch.setattr(calls, "clock", lambda: next(ticks))
    monkeypatch.setattr(turn, "turn_clock", lambda: next(ticks))
    llm_server.script = searching("ferry Porto", "The **9:10** from the harbour.")

    async def settle(pilot: Any) -> None:
        app = pilot.app
        await memory_ready(app, pilot)
        app.session.session_memory.store.add_exchange(FERRY)
        await send(app, pilot, "hi there")

    assert snap_compare(make_app(llm_server), terminal_size=(80, 24), run_before=settle)


@pytest.mark.slow
def test_snapshot_a_long_tool_line_at_80x24_keeps_its_count_and_time(
    snap_compare: Any, llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 80 columns a call with a long query showed `· 3722`, its "ms" cut off: what was asked is
    cut now, with "…", and the count and the time stay whole."""
    import itertools

    import ocat.tools.calls as calls
    import ocat.chat.turn as turn

    ticks = itertools.count(1000.0, 3.722)  # each reading of the clock is 3722 ms on: a slow search
    monkeypatch.setattr(calls, "clock", lambda: next(ticks))
    monkeypatch.setattr(turn, "turn_clock", lambda: next(ticks))
    llm_server.script = searching("which ferry do we take to Porto from the harbour on the first Saturday of the month",
                                  "The 9:10 from the harbour.")

    async def settle(pilot: Any) -> None:
        app = pilot.app
        await memory_ready(app, pilot)
        app.session.session_memory.store.add_exchange(FERRY)
        await send(app, pilot, "hi there")
        [view] = app.query(ToolCallView)
        line = str(view.title)
        assert line.endswith("…: 1 result · 3722 ms") and len(line) <= 80 - 4, line

    assert snap_compare(make_app(llm_server), terminal_size=(80, 24), run_before=settle)


@pytest.mark.slow
def test_the_line_mode_prints_one_line_per_call(cli: Cli, llm_server: FakeLLMServer) -> None:
    llm_server.script = [*searching("blue door", "Found it."), *searching("red door", "Nothing on red.")]
    run = cli(*chat_args(llm_server), input="where is the blue door?\nand the red one?\n/quit\n")
    assert run.returncode == 0, run.stderr
    assert run.stdout.count("Found it.") == 1 and "Nothing on red." in run.stdout
    lines = [line for line in run.stderr.splitlines() if line.startswith("· searched")]
    assert len(lines) == 2 and lines[0].startswith("· searched 'blue door': ") and lines[0].endswith(" ms")


@pytest.mark.slow
def test_ask_lists_the_calls_in_json_and_on_stderr(cli: Cli, llm_server: FakeLLMServer) -> None:
    llm_server.script = [[{"name": "search_memory", "arguments": {"query": "kitchen", "limit": 3}},
                          {"name": "nope", "arguments": {}}], "Quartz."]
    run = cli("--ask", "what did we pick?", "--output", "json", *chat_args(llm_server)[1:])
    assert run.returncode == 0, run.stderr
    result = run.json()["result"]
    assert result["text"] == "Quartz."
    search, unknown = result["tool_calls"]
    assert search["name"] == "search_memory" and search["arguments"] == {"query": "kitchen", "limit": 3}
    assert search["count"] == 0 and isinstance(search["ms"], int) and search["error"] is None
    assert unknown["name"] == "nope" and "no tool 'nope'" in unknown["error"]
    assert "· searched 'kitchen': 0 results" in run.stderr and "· nope failed: there is no tool" in run.stderr


@pytest.mark.slow
def test_retry_asks_again_and_the_model_may_call_tools_again(cli: Cli, llm_server: FakeLLMServer) -> None:
    llm_server.script = [*searching("capital", "Sydney."), *searching("capital city", "Canberra.")]
    run = cli(*chat_args(llm_server), input="what is the capital of Australia?\n/retry\n/quit\n")
    assert run.returncode == 0, run.stderr
    assert "Canberra." in run.stdout
    assert sum(1 for line in run.stderr.splitlines() if line.startswith("· searched")) == 2
    exported = [line for line in cli("--export-memory", "-").json_lines() if line["kind"] == "exchange"]
    assert [e["assistant_response"] for e in exported] == ["Canberra."]
    assert exported[0]["tool_calls"][0]["arguments"] == {"query": "capital city"}


def test_tool_calls_travel_with_their_exchange_through_export_and_import(store: MemoryStore, tmp_path: Any) -> None:
    from ocat.memory import StoreLocation
    from ocat.records import CalledTool
    from tests.support.fakes import FakeEmbedder

    called = (CalledTool("search_memory", '{"query":"ferry"}', 1, ("e1",), 12, None),
              CalledTool("remember", '{"text":"x"}', None, (), 3, "text is empty"))
    store.add_exchange(Exchange(user_prompt="q", assistant_response="a", thread_id="t", session_id="s",
                                exchange_id="x1", tool_calls=called))
    out = io.StringIO()
    export_memory(store, out)
    line = json.loads(out.getvalue().splitlines()[0])
    assert line["tool_calls"][0] == {"name": "search_memory", "arguments": {"query": "ferry"}, "count": 1,
                                     "ids": ["e1"], "ms": 12, "error": None}
    path = tmp_path / "export.jsonl"
    path.write_text(out.getvalue())
    other = MemoryStore.open(StoreLocation(path=tmp_path / "other"), FakeEmbedder(), name="o")
    import_memory(other, path)
    again = other.get("x1")
    assert isinstance(again, Exchange) and again.tool_calls == called
    again_out = io.StringIO()
    export_memory(other, again_out)
    assert again_out.getvalue() == out.getvalue()
