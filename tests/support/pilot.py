"""Helpers for driving the chat app with Textual's Pilot: build it, wait for memory, send a line,
wait for a command."""

from __future__ import annotations

from typing import Any

from textual.worker import WorkerCancelled

from ocat.config.loading import load_settings
from ocat.chat.session import ChatSession
from ocat.ui.app import OcatApp
from ocat.ui.widgets import NoticeMessage, PromptInput
from tests.support.fakes import FakeLLMServer


def make_app(server: FakeLLMServer | None = None, *, dummy: bool = False, **overrides: Any) -> OcatApp:
    """The app on the test's settings (plus `overrides`), talking to `server` when given."""
    extra: dict[str, Any] = {}
    if server is not None:
        extra = {"llm.model": "openai/fake-model", "llm.api_base": server.api_base, "llm.api_key": "sk-test"}
    settings = load_settings(overrides={**extra, **overrides})
    return OcatApp(ChatSession(settings, dummy=dummy), serve=False)


async def memory_ready(app: OcatApp, pilot: Any) -> None:
    """Wait until the app's memory has opened (or failed to)."""
    # A blinking cursor would make screenshots depend on the moment they are taken.
    app.query_one(PromptInput).cursor_blink = False
    for _ in range(300):
        if not app.memory_view.state.pending:
            return
        await pilot.pause(0.05)
    raise AssertionError("memory never became ready")


async def send(app: OcatApp, pilot: Any, text: str) -> None:
    """Type `text` into the prompt, press Enter and wait for the chat turn it starts."""
    prompt = app.query_one(PromptInput)
    prompt.text = text
    await pilot.press("enter")
    await pilot.pause()
    if app.turn is not None:
        try:
            await app.turn.wait()
        except WorkerCancelled:
            pass  # Esc, or a newer turn: the test reads what the cancelled one left
    await pilot.pause()


async def wait_for_command(app: OcatApp, pilot: Any) -> None:
    """Wait until the slash command just sent has finished and shown its result."""
    await wait_for(pilot, lambda: app.commands.worker is not None, "the command")
    assert app.commands.worker is not None
    try:
        await app.commands.worker.wait()
    except WorkerCancelled:
        pass  # stopped by the test (Esc): it reads what the command showed
    await pilot.pause()


def conversation(app: OcatApp) -> list[Any]:
    """The widgets of the conversation, in order."""
    return list(app.query("#conversation > *"))


def notices(app: OcatApp) -> list[str]:
    """The text of every notice in the conversation."""
    return [str(w.render()) for w in app.query(NoticeMessage)]


async def wait_for(pilot: Any, condition: Any, what: str, *, seconds: float = 5.0) -> None:
    """Wait until `condition()` holds (a worker's effect on screen), failing after `seconds`."""
    for _ in range(int(seconds / 0.05)):
        if condition():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"never happened: {what}")


def screen_text(app: OcatApp) -> str:
    """What the window shows now, as plain text (one line per row of cells)."""
    import io

    from rich.console import Console

    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True, record=True,
                      legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text()
