"""The README's pictures, made from the real app: the full-screen chat with the memories it used,
the memory browser, and the consent dialog, each exported as SVG by Textual's own screenshot
export (`App.export_screenshot`) from the app run under `run_test`.

Each picture starts from a sample store built here, in a home folder of its own: a few earlier
conversations and a note, with fixed ids and times, embedded by the real model. Answers come
from the tests' fake OpenAI-compatible server (tests/support/fakes.py), the tool from the
tests' MCP fixture server, and the clock shows UTC, so the same code draws the same pictures.

    python docs/screenshots.py            # write docs/screenshots/*.svg
    python docs/screenshots.py --check    # compare only: exit 1 and name the stale ones

tests/unit/test_screenshots.py runs `--check`, so a change to what these screens show fails until
the pictures are made again (and looked at) with the first command.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run as `python docs/screenshots.py`: tests.support is the repository's

from tests.support import MODEL_DIR  # noqa: E402 - after the path above
from tests.support.fakes import FakeLLMServer, serving  # noqa: E402

PICTURES = REPO / "docs" / "screenshots"
SIZE = (100, 30)
# How long a step may take on a busy machine (a test run beside others) before it is a failure.
WAIT = 60.0
MODEL = "openai/gpt-4o-mini"  # what the header names; the fake server answers for it

# The sample store: earlier conversations (thread, then prompt and answer pairs), one a day
# apart from 14 November 2025, and a note. Fixed ids and times, so every run stores the same.
START = 1_763_100_000.0
THREADS: list[tuple[str, list[tuple[str, str]]]] = [
    ("3f2a9c1e-5b7d-4e21-9a0c-6d2e8b41f7a3", [
        ("we're renovating the kitchen. the contractor quoted €38,000 for cabinets and counters",
         "That is high for cabinets alone: ask for an itemised quote, and a second one."),
        ("for the kitchen counters we picked white quartz instead of granite",
         "Good choice: quartz resists stains and needs no sealing. Budget about €18,000 with the cabinets."),
    ]),
    ("7c41d0b2-88e3-4f5a-b1d6-0e9f3a7c2d15", [
        ("plan the vegetable garden: tomatoes, beans, courgettes",
         "Tomatoes first in the sunniest bed; beans after the last frost; courgettes need room."),
        ("when do I sow beans in Porto?", "After the last frost: late April or early May."),
    ]),
    ("b9e07a55-12cd-4b8f-8e3a-5f1c9d04b6e2", [
        ("we fly to Lisbon in May, three days", "Lovely: warm, and before the summer crowds. Book the Belém tower early."),
    ]),
    ("e2d5f6a7-3c4b-4d9e-a1f2-8b7e6c3d0a91", [
        ("file the taxes before April", "Done by Friday: the IRS form is in the shared folder."),
    ]),
]
NOTE = "The kitchen contractor is Sousa & Filhos; Rui answers the phone, +351 22 000 0000."
NOTE_TIME = START + 5 * 86_400
PROFILE = "I live in Porto; short answers, metric units, euros.\n"


def isolate(home: Path) -> None:
    """A fresh user's environment in `home`: its own config, store and state, the model of the
    tests (never downloaded), and UTC on the clock, so dates are the same on every machine."""
    for name in list(os.environ):
        if name.startswith(("OCAT_", "XDG_")):
            del os.environ[name]
    os.environ["HOME"] = str(home)
    for variable, folder in (("XDG_CONFIG_HOME", ".config"), ("XDG_DATA_HOME", ".local/share"),
                             ("XDG_STATE_HOME", ".local/state"), ("XDG_CACHE_HOME", ".cache")):
        os.environ[variable] = str(home / folder)
    os.environ["OCAT_EMBEDDING_MODEL_PATH"] = str(MODEL_DIR)
    os.environ["OCAT_EMBEDDING_THREADS"] = "1"
    os.environ["TZ"] = "UTC"
    time.tzset()


def fill(settings: Any) -> None:
    """The sample store, written before the app opens it (so the header counts it), and a profile."""
    from ocat.memory import open_store
    from ocat.memory.ingest import documents
    from ocat.operations.add import add_note
    from ocat.records import Exchange

    store = open_store(settings)
    try:
        for day, (thread, pairs) in enumerate(THREADS):
            for seq, (prompt, answer) in enumerate(pairs):
                store.add_exchange(Exchange(
                    user_prompt=prompt, assistant_response=answer, thread_id=thread, session_id=f"session-{day}",
                    exchange_id=f"{thread[:8]}-{seq}", timestamp=START + day * 86_400 + seq * 300))
        documents.now = lambda: NOTE_TIME  # the note's date, in the pictures
        add_note(store, NOTE, settings.chunking, source="vadd_command")
    finally:
        store.close()
    profile = Path(os.environ["XDG_CONFIG_HOME"]) / "ocat" / "profile.md"
    profile.parent.mkdir(parents=True, exist_ok=True)
    profile.write_text(PROFILE, encoding="utf-8")


def steady_clock() -> None:
    """The status line's times as one fixed figure: how long an answer took is the machine's."""
    from ocat.ui import app, status

    app.usage_line = lambda usage, seconds: status.usage_line(usage, 1.2)
    app.answering_line = lambda seconds: status.answering_line(2.4)


def make_app(server: FakeLLMServer, folder: Path, **overrides: Any) -> Any:
    """The sample store filled, then the full-screen chat as `ocat` opens it on that store,
    answering through the fake server, with the tests' MCP fixture server as the config's
    `notes` server (its note file in `folder`)."""
    from ocat.chat.session import ChatSession
    from ocat.config.loading import load_settings
    from ocat.config.mcp_servers import parse_servers
    from ocat.ui.app import OcatApp
    from ocat.ui.consent import ask_in_window

    settings = load_settings(overrides={"llm.model": MODEL, "llm.api_base": server.api_base,
                                        "llm.api_key": "sk-screenshots", **overrides})
    fill(settings)
    notes = {"command": sys.executable, "args": [str(REPO / "tests" / "support" / "mcp_fixture_server.py")],
             "env": {"FIXTURE_NOTE_FILE": str(folder / "note.txt")}, "timeout": 5, "start_timeout": 60}
    servers = parse_servers({"notes": notes}, "screenshots", folder)
    # As `ocat` makes it: the session asks consent in the window (ocat.cli.dispatch).
    return OcatApp(ChatSession(dataclasses.replace(settings, mcp_servers=servers), ask=ask_in_window), serve=False)


async def chat(app: Any, pilot: Any, server: FakeLLMServer) -> None:
    """A question about an earlier conversation, answered with the memories shown."""
    from tests.support.pilot import send

    server.reply = ("You picked **white quartz** instead of granite: it resists stains and needs no sealing.\n\n"
                    "The budget was about **€18,000** with the cabinets, against the contractor's first "
                    "quote of €38,000.")
    await send(app, pilot, "which counter tops did we pick for the kitchen, and what did they cost?")


async def browser(app: Any, pilot: Any, server: FakeLLMServer) -> None:
    """`/memory kitchen`: the search's listing, and the highlighted thread read in the pane below."""
    from textual.widgets import Markdown

    from ocat.ui.memory_browser import EntryList, MemoryBrowser
    from ocat.ui.widgets import PromptInput
    from tests.support.pilot import wait_for

    app.query_one(PromptInput).text = "/memory kitchen"
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(app.screen, MemoryBrowser), "the browser opens", seconds=WAIT)
    screen = app.screen
    await wait_for(pilot, lambda: screen.entries, "the search's listing", seconds=WAIT)
    await pilot.press("tab")  # on to the list: the footer shows what its keys do
    await wait_for(pilot, lambda: isinstance(app.focused, EntryList), "the list focused", seconds=WAIT)
    first = screen.entries[0].title.split("…")[0][:30]
    await wait_for(pilot, lambda: first in screen.query_one("#browser-text", Markdown).source, "the preview", seconds=WAIT)
    await app.workers.wait_for_complete()
    await pilot.pause()


async def consent(app: Any, pilot: Any, server: FakeLLMServer) -> None:
    """The model asks for an MCP server's tool with a side effect: the chat asks first."""
    from ocat.ui.consent import ConsentDialog
    from ocat.ui.widgets import PromptInput
    from tests.support.pilot import wait_for

    server.script = [[{"name": "notes__write_note",
                       "arguments": {"text": "Kitchen: white quartz counters, about €18,000 with the cabinets."}}],
                     "Saved to your notes."]
    app.query_one(PromptInput).text = "add the kitchen decision to my notes"
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(app.screen, ConsentDialog), "the consent dialog", seconds=WAIT)
    dialog = app.screen
    # As the user sees it once it counts answers (ocat.ui.consent.ARMING_DELAY after it is painted).
    await wait_for(pilot, lambda: dialog.armed and app.focused is not None and app.focused.id == "n",
                   "the dialog armed, No focused", seconds=WAIT)
    await pilot.pause()


Scene = Callable[[Any, Any, FakeLLMServer], Awaitable[None]]


async def picture(scene: Scene, folder: Path, **overrides: Any) -> tuple[str, str]:
    """Run the app on a new sample store, play `scene`, and export what the window shows: as
    SVG, and as plain text (to read in a terminal)."""
    from tests.support.pilot import memory_ready, screen_text

    isolate(folder / "home")
    steady_clock()
    with serving(FakeLLMServer()) as server:
        app = make_app(server, folder, **overrides)
        async with app.run_test(size=SIZE) as pilot:
            await memory_ready(app, pilot)
            await scene(app, pilot, server)
            drawn = app.export_screenshot(title="ocat"), screen_text(app)
            await finish(app, pilot)
            return drawn


async def finish(app: Any, pilot: Any) -> None:
    """Leave as a user would: say no to a question still open, and let the turn end (a turn
    cut off at exit leaves its HTTP stream to be closed by a loop that is gone)."""
    from ocat.ui.consent import ConsentDialog

    if isinstance(app.screen, ConsentDialog):
        await pilot.press("n")
    if app.turn is not None:
        await app.turn.wait()
    await pilot.pause()


SCENES: dict[str, tuple[Scene, dict[str, Any]]] = {
    "chat.svg": (chat, {"display.context_mode": "on"}),
    "memory-browser.svg": (browser, {}),
    "consent.svg": (consent, {"tools.enabled": "on"}),
}


def draw(only: list[str] | None = None) -> dict[str, tuple[str, str]]:
    """Every picture (or those named) by file name: its SVG and its plain text."""
    drawn = {}
    for name, (scene, overrides) in SCENES.items():
        if only and name not in only:
            continue
        with tempfile.TemporaryDirectory(prefix="ocat-screenshots-") as scratch:
            drawn[name] = asyncio.run(picture(scene, Path(scratch), **overrides))
    return drawn


def main(argv: list[str] | None = None) -> int:
    """Write the pictures, or with --check say which differ from the committed ones."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with docs/screenshots/ and change nothing")
    parser.add_argument("--out", type=Path, default=PICTURES, help="write the pictures here (default: docs/screenshots/)")
    parser.add_argument("--text", action="store_true", help="also print each picture as plain text")
    parser.add_argument("names", nargs="*", help=f"only these pictures: {', '.join(SCENES)}")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(SCENES))
    if unknown:
        parser.error(f"no picture named {', '.join(unknown)}; there are {', '.join(SCENES)}")
    pictures = draw(args.names)
    if args.text:
        for name, (_svg, text) in pictures.items():
            print(f"{name}:\n{text}")
    drawn = {name: svg for name, (svg, _text) in pictures.items()}
    if args.check:
        stale = [name for name, svg in drawn.items()
                 if not (PICTURES / name).is_file() or (PICTURES / name).read_text(encoding="utf-8") != svg]
        for name in stale:
            print(f"docs/screenshots/{name} is stale: run python docs/screenshots.py and look at it", file=sys.stderr)
        return 1 if stale else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, svg in drawn.items():
        (args.out / name).write_text(svg, encoding="utf-8")
        print(f"wrote {args.out / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
