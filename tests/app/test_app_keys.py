"""The prompt box's keys as a fast typist, a script or a laggy link sends them: nothing typed is lost.

Keys that arrive in one read of the terminal (typing ahead while the app is busy, `tmux send-keys`,
an SSH link that delivers a burst) must act in the order they were typed; Enter while an answer
streams queues the prompt; history keeps the draft.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from textual._xterm_parser import XTermParser
from textual.app import App
from textual.worker import WorkerCancelled, WorkerFailed

from ocat.ui.answer import AssistantMessage
from ocat.ui.app import OcatApp
from ocat.ui.widgets import NoticeMessage, PromptInput, UserMessage
from tests.support.fakes import FakeLLMServer
from tests.support.pilot import conversation, make_app, memory_ready, send, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.anyio]


def type_in_one_read(app: App[Any], data: str) -> None:
    """Deliver `data` as the terminal would in one read: parsed by Textual's own input parser and
    posted all at once, with no pause between the keys for the app to catch up.

    (`pilot.press` waits for the app to go idle after every key, so it never shows an ordering bug.)
    """
    for event in XTermParser().feed(data):
        app.post_message(event)


def sent_prompts(app: OcatApp) -> list[str]:
    return [str(w.render()) for w in app.query(UserMessage)]


def notices(app: OcatApp) -> list[str]:
    return [str(w.render()) for w in app.query(NoticeMessage)]


async def turn_done(app: OcatApp, pilot: Any) -> None:
    """Wait for the chat turn that is running (if any) to end."""
    if app.turn is not None:
        with contextlib.suppress(WorkerCancelled, WorkerFailed):  # what some tests want
            await app.turn.wait()
    await pilot.pause()


async def test_a_burst_of_keys_ending_in_enter_sends_all_of_it() -> None:
    app = make_app(dummy=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        type_in_one_read(app, "hello world this is a fast typed test\r")
        await wait_for(pilot, lambda: app.turn is not None, "the prompt is sent")
        await turn_done(app, pilot)
        assert sent_prompts(app) == ["hello world this is a fast typed test"]
        assert app.query_one(PromptInput).text == ""


async def test_keys_typed_after_enter_in_the_same_burst_stay_for_the_next_prompt() -> None:
    app = make_app(dummy=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        type_in_one_read(app, "first\rsecond thoughts")
        await wait_for(pilot, lambda: sent_prompts(app) == ["first"], "the first prompt is sent")
        await turn_done(app, pilot)
        assert app.query_one(PromptInput).text == "second thoughts"


async def test_slash_help_and_enter_in_one_burst_runs_help_and_a_partial_name_completes() -> None:
    app = make_app(dummy=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        prompt = app.query_one(PromptInput)
        type_in_one_read(app, "/help\r")
        await wait_for(pilot, lambda: any(n.startswith("Commands by purpose") for n in notices(app)), "/help runs")
        assert prompt.text == ""
        # Enter on a partial name still completes it, even before the list has been drawn.
        type_in_one_read(app, "/vq\r")
        await wait_for(pilot, lambda: prompt.text == "/vquery ", "/vq completes")
        assert not any("unknown command" in n for n in notices(app))


async def test_a_remapped_send_key_works_in_a_burst_and_enter_then_breaks_the_line() -> None:
    app = make_app(dummy=True, **{"keys.send": "ctrl+s"})
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        type_in_one_read(app, "first line\rsecond line\x13")  # \x13 is what a terminal sends for Ctrl+S
        await wait_for(pilot, lambda: sent_prompts(app) == ["first line\nsecond line"], "the prompt is sent")
        await turn_done(app, pilot)
        assert app.query_one(PromptInput).text == ""
        active = app.screen.active_bindings
        assert active["ctrl+s"].binding.action == "submit" and "enter" not in active  # the footer shows ^s Send


async def test_the_footer_still_shows_enter_sends() -> None:
    app = make_app(dummy=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        active = app.screen.active_bindings
        assert active["enter"].binding.action == "submit" and active["enter"].binding.show
        assert active["enter"].node is app.query_one(PromptInput)


async def test_enter_while_an_answer_streams_queues_the_prompt_and_sends_it_after(llm_server: FakeLLMServer) -> None:
    llm_server.reply = "A long answer that arrives slowly, piece by piece, over a second or so."
    llm_server.delay = 0.05
    app = make_app(llm_server)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        prompt = app.query_one(PromptInput)
        type_in_one_read(app, "tell me slowly\r")
        await wait_for(pilot, lambda: any(a.source for a in app.query(AssistantMessage)), "the answer streams",
                       seconds=30)  # the first answer of a run loads litellm first
        first_turn = app.turn
        type_in_one_read(app, "and then?\r")
        await wait_for(pilot, lambda: prompt.held == ["and then?"], "the prompt is held")
        assert prompt.text == ""  # it left the box
        assert any("Queued «and then?»: it sends when the answer ends (Esc cancels the answer)" in n
                   for n in notices(app))
        assert "1 queued" in str(prompt.border_subtitle)
        assert sent_prompts(app) == ["tell me slowly"] and first_turn is not None and not first_turn.is_finished
        await wait_for(pilot, lambda: sent_prompts(app) == ["tell me slowly", "and then?"], "it is sent after",
                       seconds=30)
        assert first_turn.is_finished and app.turn is not first_turn
        await turn_done(app, pilot)
        assert llm_server.requests[-1]["messages"][-1]["content"] == "and then?"
        assert app.last_answer == llm_server.reply  # the second turn finished too
        assert prompt.held == [] and not prompt.border_subtitle


async def test_escape_cancels_the_answer_and_the_queued_prompt_goes_next(llm_server: FakeLLMServer) -> None:
    llm_server.reply = "An answer long enough to be cancelled well before it ends, piece by piece." * 3
    llm_server.delay = 0.05
    app = make_app(llm_server)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        prompt = app.query_one(PromptInput)
        # Both in one burst: the second Enter comes before the first turn has shown anything.
        type_in_one_read(app, "tell me slowly\rnever mind: what is 2+2?\r")
        await wait_for(pilot, lambda: bool(prompt.held), "the prompt is held")
        await wait_for(pilot, lambda: any(n.startswith("Queued") for n in notices(app)), "it is shown as queued")
        shown = [type(w).__name__ for w in conversation(app)]
        assert shown[:2] == ["UserMessage", "NoticeMessage"]  # the running prompt first, then the queued one
        await wait_for(pilot, lambda: any(a.source for a in app.query(AssistantMessage)), "the answer streams",
                       seconds=30)  # the first answer of a run loads litellm first
        await pilot.press("escape")
        await wait_for(pilot, lambda: any(n.startswith("Cancelled") for n in notices(app)), "the answer is cancelled")
        await wait_for(pilot, lambda: sent_prompts(app) == ["tell me slowly", "never mind: what is 2+2?"],
                       "the queued prompt is sent")
        # Cancel its answer too, so the test does not wait for it.
        await wait_for(pilot, lambda: app.turn is not None and not app.turn.is_finished, "it is answered")
        await pilot.press("escape")
        await turn_done(app, pilot)


async def test_a_failed_answer_puts_its_prompt_and_the_queued_one_back_cursor_at_end(
        llm_server: FakeLLMServer) -> None:
    llm_server.status = 500
    app = make_app(llm_server, **{"llm.timeout_seconds": 5})
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        prompt = app.query_one(PromptInput)
        # In one burst the second Enter always comes while the first answer is on its way.
        type_in_one_read(app, "will this work?\rand this?\r")
        await wait_for(pilot, lambda: prompt.text == "will this work?\n\nand this?", "both come back",
                       seconds=30)  # the first answer of a run loads litellm first
        await turn_done(app, pilot)
        assert prompt.cursor_location == prompt.document.end
        assert prompt.held == [] and not prompt.border_subtitle
        assert sent_prompts(app) == ["will this work?"]  # nothing more was sent after the failure
        assert app._held_sender is None


async def test_a_failed_answer_alone_comes_back_with_the_cursor_at_its_end(llm_server: FakeLLMServer) -> None:
    llm_server.status = 500
    app = make_app(llm_server, **{"llm.timeout_seconds": 5})
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        await send(app, pilot, "will this work?")
        prompt = app.query_one(PromptInput)
        assert prompt.text == "will this work?"
        assert prompt.cursor_location == prompt.document.end
        await pilot.press("!")  # typing goes after the text, not before it
        assert prompt.text == "will this work?!"


async def test_a_command_sent_while_a_command_runs_runs_after_it() -> None:
    app = make_app(dummy=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        # In one burst, the second Enter always comes while the first command runs.
        type_in_one_read(app, "/vadd the spare key is under the flowerpot\r/vstats\r")
        await wait_for(pilot, lambda: any("Queued «/vstats»: it sends when the command ends (Esc stops it)" in n
                                          for n in notices(app)), "/vstats is held")

        def results() -> list[str]:
            return [str(n.render()) for r in app.query(".command-result") for n in r.query(NoticeMessage)]

        await wait_for(pilot, lambda: len(results()) == 2, "both commands ran")
        first, second = results()
        assert first.startswith("Remembered") and second == "Memory"  # in the order they were typed
        assert app.query_one(PromptInput).held == []


async def test_up_keeps_the_draft_down_brings_it_back_and_the_cursor_goes_to_the_end() -> None:
    app = make_app(dummy=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        await send(app, pilot, "first prompt")
        await send(app, pilot, "second prompt")
        prompt = app.query_one(PromptInput)
        await pilot.press(*"my draft")
        await pilot.press("up")
        assert prompt.text == "second prompt"
        assert prompt.cursor_location == prompt.document.end
        await pilot.press("!")  # typing appends to the recalled text
        assert prompt.text == "second prompt!"
        await pilot.press("up")
        assert prompt.text == "first prompt" and prompt.cursor_location == prompt.document.end
        await pilot.press("up")  # the oldest: stays
        assert prompt.text == "first prompt"
        await pilot.press("down")
        assert prompt.text == "second prompt!"  # the edit is kept while walking
        await pilot.press("down")
        assert prompt.text == "my draft"
        assert prompt.cursor_location == prompt.document.end
        await pilot.press("down")  # below the draft there is nothing
        assert prompt.text == "my draft"


async def test_history_keys_in_a_burst_act_in_order() -> None:
    app = make_app(dummy=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        await send(app, pilot, "what is the capital of France?")
        prompt = app.query_one(PromptInput)
        # Up, then a word typed after the recalled text, then Enter: as a fast typist would.
        type_in_one_read(app, "\x1b[A and Spain\r")
        await wait_for(pilot, lambda: len(sent_prompts(app)) == 2, "the edited prompt is sent")
        await turn_done(app, pilot)
        assert sent_prompts(app)[-1] == "what is the capital of France? and Spain"
        assert prompt.text == ""


async def test_a_typo_fixed_with_backspace_in_a_burst_is_fixed_in_place() -> None:
    app = make_app(dummy=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        type_in_one_read(app, "helo\x7f\x7fllo there")  # \x7f: Backspace
        prompt = app.query_one(PromptInput)
        await wait_for(pilot, lambda: len(prompt.text) == len("hello there"), "the burst is typed")
        assert prompt.text == "hello there"
