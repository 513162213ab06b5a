"""Issue 44: nothing typed ahead answers a consent question for the user.

The full-screen dialog counts a key or a click only once armed (ConsentDialog.arm, ARMING_DELAY
after it is painted and after the last key typed into it); what is typed or pasted before goes
on to the prompt box, in order. The tests here arm it by hand (a delay no test waits out), so
none depends on the clock. The dialog keeps its buttons and every argument's name on screen
however long a value is. The line mode sets aside what was typed before its question.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from textual import events
from textual.app import App, ComposeResult
from textual.widgets import Button

from ocat.mcp_client.consent import ConsentRequest, always_allowed
from ocat.ui.consent import ConsentDialog
from ocat.ui.widgets import PromptInput
from tests.support.cli import Cli
from tests.support.examples import examples
from tests.support.fakes import FakeLLMServer
from tests.support.pilot import wait_for
from tests.unit.test_mcp_client import calls_made, fixture_entry, write_config
from tests.app.test_mcp_consent_faces import (_read_until, app_with_fixture, line_mode_on_a_terminal, start_turn,
                                          turn_done)

# Longer than any test runs: only `arm()` arms the dialog, as the timer would.
NEVER = 3600.0
REQUEST = ConsentRequest("files", "write_file", {"path": "notes/plan.md", "content": "buy milk"})


class Host(App[None]):
    """A prompt box and nothing else; `ask` opens the dialog over it, as the chat does."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: list[str | None] = []
        self.sent: list[str] = []

    def compose(self) -> ComposeResult:
        yield PromptInput(id="prompt", history=[])

    def on_mount(self) -> None:
        self.query_one(PromptInput).focus()

    def ask(self, request: ConsentRequest = REQUEST, delay: float = NEVER) -> ConsentDialog:
        dialog = ConsentDialog(request, arming_delay=delay)
        self.push_screen(dialog, self.answers.append)
        return dialog

    def on_prompt_input_submitted(self, message: PromptInput.Submitted) -> None:
        self.sent.append(message.text)

    @property
    def typed(self) -> str:
        return self.query_one(PromptInput).text


def keys(text: str) -> list[str]:
    """`text` as pilot.press key names."""
    return ["space" if char == " " else char for char in text]


@pytest.mark.anyio
async def test_keys_typed_as_the_dialog_opens_go_to_the_prompt_and_answer_nothing(isolated_home: Path) -> None:
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press(*keys("what "))
        dialog = app.ask()
        await pilot.pause()
        # B1: the "a" of "about" used to answer Always, and " abou" was lost.
        await pilot.press(*keys("about adding a test"), "escape")
        assert app.answers == [] and app.screen is dialog
        assert app.typed == "what about adding a test"
        assert all(button.disabled for button in dialog.query(Button))
        await pilot.click("#a")  # a click before the dialog is armed answers nothing either
        assert app.answers == []
        dialog.arm()
        await pilot.press("n")
        assert app.answers == ["n"] and app.typed == "what about adding a test"


@pytest.mark.anyio
async def test_keys_queued_before_the_dialog_opened_all_reach_the_prompt_in_order(isolated_home: Path) -> None:
    from tests.app.test_app_keys import type_in_one_read

    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        type_in_one_read(app, "what ")  # read before the question came, handled after it opened
        app.ask()
        type_in_one_read(app, "about\x7fut a yes")  # Backspace included: edits act on the box
        await pilot.pause()
        app.post_message(events.Paste(" and always"))
        await pilot.pause()
        assert app.answers == [] and app.typed == "what abouut a yes and always"


@pytest.mark.anyio
async def test_enter_typed_ahead_sends_the_prompt_and_answers_nothing(isolated_home: Path) -> None:
    from tests.app.test_app_keys import type_in_one_read

    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        dialog = app.ask()
        type_in_one_read(app, "what about a test\rand")
        await pilot.pause()
        assert app.answers == [] and app.sent == ["what about a test"] and app.typed == "and"
        assert app.screen is dialog and not dialog.armed


@pytest.mark.anyio
async def test_a_key_that_is_not_an_answer_disarms_the_dialog_again(isolated_home: Path) -> None:
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        dialog = app.ask()
        await pilot.pause()
        dialog.arm()
        await pilot.pause()
        assert app.focused is not None and app.focused.id == "n"
        await pilot.press("w", "h", "a", "t")  # still typing: the "a" goes to the prompt too
        app.post_message(events.Paste("y"))  # a paste never answers
        await pilot.pause()
        assert app.answers == [] and app.typed == "whaty" and not dialog.armed
        dialog.arm()
        await pilot.click("#y")
        assert app.answers == ["y"]


@pytest.mark.anyio
async def test_the_dialog_arms_itself_after_its_delay(isolated_home: Path) -> None:
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        dialog = app.ask(delay=0.05)
        await wait_for(pilot, lambda: dialog.armed, "the dialog armed by its timer")
        await pilot.press("a")
        assert app.answers == ["a"] and app.typed == ""


MANY = {**{f"part{i}": "y" * 500 for i in range(8)}, "then": "rm -rf ~"}


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
@pytest.mark.parametrize("arguments", [{"content": "x" * 3000, "then": "rm -rf ~"}, MANY], ids=["two", "many"])
@pytest.mark.anyio
async def test_buttons_and_every_name_stay_on_screen_whatever_the_values(
    isolated_home: Path, size: tuple[int, int], arguments: dict[str, str]
) -> None:
    # B15: a 3,000-character argument pushed the buttons and a second argument off screen.
    app = Host()
    async with app.run_test(size=size) as pilot:
        dialog = app.ask(ConsentRequest("files", "write_file", arguments))
        await pilot.pause()
        dialog.arm()
        await pilot.pause()
        screen = dialog.region
        for button in dialog.query(Button):
            assert button.region.height == 3 and screen.contains_region(button.region), button.id
        assert ", ".join(sorted(arguments)) in str(dialog.query_one("#consent-names").render())
        names = dialog.query(".consent-name")
        assert [str(name.render()).split()[0] for name in names] == sorted(arguments)
        if len(arguments) == 2:  # both rows in view too (many rows scroll; the line above names them all)
            assert all(name.region.height == 1 and screen.contains_region(name.region) for name in names)
        await pilot.press("n")
        assert app.answers == ["n"]


def test_snapshot_a_long_argument_and_a_second_one_at_80x24(snap_compare: Any) -> None:
    request = ConsentRequest("files", "write_file", {"content": "lorem ipsum " * 250, "then": "rm -rf ~"})

    class Shown(App[None]):
        def on_mount(self) -> None:
            self.push_screen(ConsentDialog(request, arming_delay=NEVER))

    async def armed(pilot: Any) -> None:
        await pilot.pause()
        assert isinstance(pilot.app.screen, ConsentDialog)
        pilot.app.screen.arm()
        await pilot.pause()

    assert snap_compare(Shown(), terminal_size=(80, 24), run_before=armed)


# -- a property: keys, pastes and tool calls interleaved ------------------------------------------

_KEYS = ["y", "a", "n", "w", "b", "space", "escape", "backspace"]
_STEPS = st.one_of(
    st.tuples(st.just("key"), st.sampled_from(_KEYS)),
    st.tuples(st.just("paste"), st.text(alphabet="yan wb\n", min_size=1, max_size=6)),
    st.tuples(st.just("call"), st.just("")),  # the model calls a tool: a question opens (if none is open)
    st.tuples(st.just("arm"), st.just("")),  # time passes: the open question arms
)


async def _drive(steps: list[tuple[str, str]]) -> None:
    app = Host()
    # What the prompt box must hold, whether a question is open and armed, and the answers given.
    typed, open_, armed, answers = "", False, False, []
    async with app.run_test(size=(80, 24)) as pilot:
        dialog: ConsentDialog | None = None
        for kind, value in steps:
            if kind == "call" and not open_:
                dialog, open_, armed = app.ask(), True, False
            elif kind == "arm" and open_:
                assert dialog is not None
                dialog.arm()
                armed = True
            elif kind == "paste":
                app.post_message(events.Paste(value))
                typed, armed = typed + value, False
            elif kind == "key":
                await pilot.press(value)
                char = {"space": " "}.get(value, value)
                if open_ and armed and value in ("y", "a", "n", "escape"):
                    answers.append("n" if value == "escape" else value)
                    open_ = armed = False
                elif value == "backspace":
                    typed, armed = typed[:-1], False
                elif value != "escape":
                    typed, armed = typed + char, False
                else:
                    armed = False  # Esc typed ahead answers nothing
            await pilot.pause()
            # A question is answered only by an answer typed while it was open and armed...
            assert app.answers == answers
            assert isinstance(app.screen, ConsentDialog) is open_
            # ...and nothing typed or pasted is lost from the prompt box.
            assert app.typed == typed


@settings(max_examples=examples(40), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_STEPS, max_size=24))
# A paste disarms an armed question: none of the 40 drawn runs pastes between an arming and an answer key.
@example(steps=[("call", ""), ("arm", ""), ("paste", "w"), ("key", "y")])
def test_only_an_armed_answer_answers_and_nothing_typed_is_lost(isolated_home: Path, steps: list[tuple[str, str]]) -> None:
    asyncio.run(_drive(steps))


# -- the full-screen chat, end to end (B1) -------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.anyio
async def test_typing_while_the_model_calls_a_tool_runs_nothing_and_keeps_the_prompt(
    llm_server: FakeLLMServer, tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ocat.ui.consent

    monkeypatch.setattr(ocat.ui.consent, "ARMING_DELAY", NEVER)
    llm_server.script = [[{"name": "fx__write_note", "arguments": {"text": "buy milk"}}], "Done."]
    app = app_with_fixture(llm_server, tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await start_turn(app, pilot, "note it")
        await wait_for(pilot, lambda: isinstance(app.screen, ConsentDialog), "the consent dialog", seconds=60)
        dialog = app.screen
        assert isinstance(dialog, ConsentDialog)
        await pilot.press(*keys("what about adding a test"))
        assert isinstance(app.screen, ConsentDialog) and calls_made(tmp_path) == []
        dialog.arm()
        await pilot.press("n")
        await turn_done(app, pilot)
        assert app.query_one(PromptInput).text == "what about adding a test"
    assert not (tmp_path / "note.txt").exists() and calls_made(tmp_path) == []
    assert always_allowed() == set()


# -- the line mode ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_line_mode_sets_aside_what_was_typed_before_its_question(
    cli: Cli, llm_server: FakeLLMServer, tmp_path: Path
) -> None:
    config = write_config(cli, {"fx": fixture_entry(tmp_path)})
    llm_server.script = [[{"name": "fx__write_note", "arguments": {"text": "call mum"}}], "Not noted."]
    llm_server.stall = 1.0  # the model thinks before each answer: the user types on meanwhile
    with line_mode_on_a_terminal(cli, llm_server, config) as (process, controller, seen):
        os.write(controller, b"write it down\r")
        deadline = time.monotonic() + 60
        while not llm_server.requests:  # the prompt was read and sent: what is typed now is typed ahead
            assert time.monotonic() < deadline and process.poll() is None, "".join(seen)
            time.sleep(0.05)
        # "a" and Enter used to answer Always; the half-typed line was glued to the real answer.
        os.write(controller, b"a\rand half a line")
        _read_until(controller, "[n]o:", seen)
        os.write(controller, b"n\r")
        _read_until(controller, "Not noted.\r\n› ", seen)
        assert calls_made(tmp_path) == [] and always_allowed() == set()  # the same state folder as ocat's
        assert "set aside what was typed before this question" in "".join(seen)
        os.write(controller, b"\r")  # the next prompt starts with what was set aside (a dumb terminal shows it not)
        _read_until(controller, llm_server.reply, seen)
        os.write(controller, b"/quit\r")
        assert process.wait(timeout=60) == 0
    assert not (tmp_path / "note.txt").exists()
    sent = [m for m in llm_server.requests[-1]["messages"] if m["role"] == "user"][-1]["content"]
    assert "a\nand half a line" in sent  # nothing typed was lost
