"""Issue 31 in the faces: the full-screen chat's consent dialog, the line mode's question on a
terminal, Esc sending MCP's cancellation, /tools, and no server child outliving ocat (a normal
quit, Ctrl+Q mid-call, SIGTERM mid-call).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pty
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from ocat.config.loading import load_settings
from ocat.config.mcp_servers import parse_servers
from ocat.mcp_client.consent import DENIED, always_allowed
from ocat.chat.session import ChatSession
from ocat.ui.app import OcatApp
from ocat.ui.consent import ConsentDialog, ask_in_window
from tests.support.readable import readable
from tests.support.warm_start import python_command
from tests.support.cli import Cli
from tests.support.fakes import FakeLLMServer
from tests.support.pilot import wait_for
from tests.unit.test_mcp_client import ask_args, calls_made, fixture_entry, pid_alive, tool_messages, write_config


@pytest.fixture(autouse=True)
def quickly_armed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dialog arms 0.05 s after it is painted, not 0.75 s: what these tests press comes after
    `dialog_shown` has seen it armed, so the delay only cost each dialog its wait (typed-ahead keys
    and the delay itself are tests/app/test_consent_typed_ahead.py's)."""
    import ocat.ui.consent

    monkeypatch.setattr(ocat.ui.consent, "ARMING_DELAY", 0.05)


def app_with_fixture(server: FakeLLMServer, folder: Path, **entry: Any) -> OcatApp:
    """The chat (memory off: these tests are about tools) with the fixture server configured."""
    settings = load_settings(overrides={"llm.model": "openai/fake-model", "llm.api_base": server.api_base,
                                        "llm.api_key": "sk-test", "tools.enabled": "on",
                                        "vector_store.enabled": False})
    servers = parse_servers({"fx": fixture_entry(folder, **entry)}, "test", folder)
    return OcatApp(ChatSession(dataclasses.replace(settings, mcp_servers=servers), dummy=False, ask=ask_in_window),
                   serve=False)


async def start_turn(app: OcatApp, pilot: Any, text: str) -> None:
    """Send `text` without waiting for the turn to end (it may wait for the user)."""
    from ocat.ui.widgets import PromptInput

    app.query_one(PromptInput).text = text
    await pilot.press("enter")
    await pilot.pause()


async def dialog_shown(app: OcatApp, pilot: Any) -> ConsentDialog:
    """The consent dialog, once it is on screen, armed (ocat.ui.consent.ARMING_DELAY after it was
    painted: keys before that go to the prompt box) and No focused: ready for a key."""
    await wait_for(pilot, lambda: isinstance(app.screen, ConsentDialog), "the consent dialog", seconds=60)
    dialog = app.screen
    assert isinstance(dialog, ConsentDialog)
    await wait_for(pilot, lambda: dialog.armed and app.focused is not None and app.focused.id == "n",
                   "the dialog armed, No focused", seconds=10)
    await pilot.pause()
    return dialog


async def turn_done(app: OcatApp, pilot: Any) -> None:
    assert app.turn is not None
    await app.turn.wait()
    await pilot.pause()


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize(("key", "written", "kept"), [("y", True, False), ("n", False, False), ("a", True, True)])
async def test_the_dialog_asks_and_only_yes_or_always_run_the_tool(
    llm_server: FakeLLMServer, tmp_path: Path, isolated_home: Path, key: str, written: bool, kept: bool
) -> None:
    llm_server.script = [[{"name": "fx__write_note", "arguments": {"text": "\x1b[31mbuy milk"}}], "Done."]
    app = app_with_fixture(llm_server, tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await start_turn(app, pilot, "note it")
        dialog = await dialog_shown(app, pilot)
        shown = "\n".join(str(value.render()) for value in dialog.query(".consent-value Static"))
        assert "buy milk" in shown and "\x1b" not in shown and "\\u001b" in shown
        assert calls_made(tmp_path) == []  # nothing ran while the question is open
        await pilot.press(key)
        await turn_done(app, pilot)
    assert (tmp_path / "note.txt").exists() is written
    assert ("fx.write_note" in always_allowed()) is kept
    if not written:
        assert DENIED in tool_messages(llm_server)[0]["content"] and calls_made(tmp_path) == []


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_call_reads_server_dot_tool_while_asked_denied_and_done(
    llm_server: FakeLLMServer, tmp_path: Path, isolated_home: Path
) -> None:
    """The line under the answer said fx__write_note (the name providers allow) while the call
    waited or was denied, and fx.write_note once done: a person reads server.tool throughout."""
    from ocat.ui.tool_calls import ToolCallView

    def lines() -> list[str]:
        return [str(view.title) for view in app.query(ToolCallView)]

    llm_server.script = [[{"name": "fx__write_note", "arguments": {"text": "one"}}], "Not written.",
                         [{"name": "fx__write_note", "arguments": {"text": "two"}}], "Written."]
    app = app_with_fixture(llm_server, tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await start_turn(app, pilot, "note one")
        await dialog_shown(app, pilot)
        assert lines() == ["fx.write_note …"]
        await pilot.press("n")
        await turn_done(app, pilot)
        assert lines()[0].startswith("fx.write_note failed: ") and "fx__" not in lines()[0]
        await start_turn(app, pilot, "note two")
        await dialog_shown(app, pilot)
        await pilot.press("y")
        await turn_done(app, pilot)
        assert lines()[1].startswith("fx.write_note: ") and "fx__" not in "".join(lines())


@pytest.mark.slow
@pytest.mark.anyio
async def test_cancelling_the_turn_takes_the_question_back(
    llm_server: FakeLLMServer, tmp_path: Path, isolated_home: Path
) -> None:
    llm_server.script = [[{"name": "fx__write_note", "arguments": {"text": "later"}}], "Done."]
    app = app_with_fixture(llm_server, tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await start_turn(app, pilot, "note it")
        await dialog_shown(app, pilot)
        assert app.turn is not None
        app.turn.cancel()  # what Ctrl+C does to the turn under way
        await wait_for(pilot, lambda: not isinstance(app.screen, ConsentDialog), "the question withdrawn", seconds=10)
    assert not (tmp_path / "note.txt").exists() and calls_made(tmp_path) == []


@pytest.mark.slow
@pytest.mark.anyio
async def test_tools_lists_what_is_allowed_and_deny_takes_always_back(
    llm_server: FakeLLMServer, tmp_path: Path, isolated_home: Path
) -> None:
    from ocat.mcp_client.consent import keep_always
    from tests.support.pilot import wait_for_command

    keep_always("fx.write_note")
    app = app_with_fixture(llm_server, tmp_path, allow="read-only")
    async with app.run_test(size=(120, 40)) as pilot:
        await start_turn(app, pilot, "/tools")
        await wait_for_command(app, pilot)
        text = "\n".join(str(widget.render()) for widget in app.query(".notice, Static"))
        assert "fx: ready, 8 tools" in text and "fx.write_note: allowed (always)" in text
        assert "fx.lookup: allowed (config), read-only" in text
        await start_turn(app, pilot, "/tools deny fx.write_note")
        await wait_for_command(app, pilot)
    assert "fx.write_note" not in always_allowed()


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_tools_descriptions_stay_indented_when_they_wrap(
    llm_server: FakeLLMServer, tmp_path: Path, isolated_home: Path, size: tuple[int, int]
) -> None:
    """/tools' lines ran back to column 1 when they wrapped, at 120 columns as at 80 (a server
    named as people name them makes its lines longer than the window)."""
    from textual.geometry import Region

    from ocat.tools.listing import render_listing, tool_listing
    from ocat.ui.widgets import NoticeMessage
    from tests.support.pilot import wait_for_command

    settings = load_settings(overrides={"llm.model": "openai/fake-model", "llm.api_base": llm_server.api_base,
                                        "llm.api_key": "sk-test", "tools.enabled": "on",
                                        "vector_store.enabled": False})
    name = "household-notes-and-files-on-this-laptop"  # 40: the longest a name may be
    servers = parse_servers({name: fixture_entry(tmp_path, allow="read-only")}, "test", tmp_path)
    app = OcatApp(ChatSession(dataclasses.replace(settings, mcp_servers=servers), dummy=False, ask=ask_in_window),
                   serve=False)
    async with app.run_test(size=size) as pilot:
        await start_turn(app, pilot, "/tools")
        await wait_for_command(app, pilot)
        notice = list(app.query(NoticeMessage))[-1]
        await pilot.pause()  # the conversation's scrollbar came with the listing: the notice is narrower
        shown = ["".join(segment.text for segment in strip).rstrip()
                 for strip in notice.render_lines(Region(0, 0, notice.size.width, notice.size.height))]
        said = render_listing(tool_listing(app.session.server_tools), asks=True).splitlines()
    listed = shown[1:shown.index(next(line for line in shown if line.startswith("Memory's own tools")))]
    assert len(listed) > 9, shown  # the server's command and its 8 tools: some of them wrapped
    assert any(line.startswith(f"  {name}.flood: ") for line in listed)
    assert all(line.startswith("  ") for line in listed), "\n".join(shown)
    assert " ".join(" ".join(shown).split()) == " ".join(" ".join(said).split())  # every word kept, in order


@pytest.mark.slow
def test_snapshot_tools_at_80x24(snap_compare: Any, llm_server: FakeLLMServer, tmp_path: Path,
                                 isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """/tools at 80x24: each tool's line, and its description wrapped under it, indented."""
    from tests.support.pilot import wait_for_command
    from tests.unit.test_mcp_client import FIXTURE

    # Named as a user names it (`python` on PATH, the script beside its cwd): the picture holds no
    # path of this machine.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    entry = {**fixture_entry(tmp_path, allow="read-only"), "command": "python", "args": [FIXTURE.name],
             "cwd": str(FIXTURE.parent)}
    settings = load_settings(overrides={"llm.model": "openai/fake-model", "llm.api_base": llm_server.api_base,
                                        "llm.api_key": "sk-test", "tools.enabled": "on",
                                        "vector_store.enabled": False})
    servers = parse_servers({"household": entry}, "test", tmp_path)

    async def settle(pilot: Any) -> None:
        from ocat.ui.widgets import PromptInput

        app = pilot.app
        # A blinking cursor would make the picture depend on the moment it is taken (as memory_ready does).
        app.query_one(PromptInput).cursor_blink = False
        await wait_for(pilot, lambda: app.session.server_tools.statuses()[0].state == "ready", "the server",
                       seconds=60)
        await start_turn(app, pilot, "/tools")
        await wait_for_command(app, pilot)
        await pilot.pause(0.2)

    app = OcatApp(ChatSession(dataclasses.replace(settings, mcp_servers=servers), dummy=False, ask=ask_in_window),
                   serve=False)
    assert snap_compare(app, terminal_size=(80, 24), run_before=settle)


@pytest.mark.slow
@pytest.mark.anyio
async def test_escape_cancels_a_running_call_and_the_server_hears_it(
    llm_server: FakeLLMServer, tmp_path: Path, isolated_home: Path
) -> None:
    llm_server.script = [[{"name": "fx__hang", "arguments": {}}], "Never."]
    app = app_with_fixture(llm_server, tmp_path, allow=["hang"], timeout=600, cold=True)  # looked for once closed
    async with app.run_test(size=(100, 30)) as pilot:
        await start_turn(app, pilot, "wait forever")
        await wait_for(pilot, lambda: any(c["tool"] == "hang" for c in calls_made(tmp_path)), "the call", seconds=60)
        await pilot.press("escape")
        await wait_for(pilot, lambda: any(c["tool"] == "hang-cancelled" for c in calls_made(tmp_path)),
                       "MCP's cancellation at the server", seconds=30)
        pid = calls_made(tmp_path)[0]["pid"]
        assert pid_alive(pid)  # the server stays up for the next call
        await pilot.press("ctrl+q")
    assert app.memory_view.closing is not None
    app.memory_view.closing.join(30)
    assert not pid_alive(pid)


@pytest.mark.slow
@pytest.mark.anyio
async def test_ctrl_q_mid_call_leaves_no_server_behind(llm_server: FakeLLMServer, tmp_path: Path,
                                                       isolated_home: Path) -> None:
    llm_server.script = [[{"name": "fx__hang", "arguments": {}}], "Never."]
    app = app_with_fixture(llm_server, tmp_path, allow=["hang"], timeout=600, cold=True)  # looked for once closed
    async with app.run_test(size=(100, 30)) as pilot:
        await start_turn(app, pilot, "wait forever")
        await wait_for(pilot, lambda: any(c["tool"] == "hang" for c in calls_made(tmp_path)), "the call", seconds=60)
        await pilot.press("ctrl+q")
    assert app.memory_view.closing is not None
    app.memory_view.closing.join(30)
    assert not pid_alive(calls_made(tmp_path)[0]["pid"])


def test_snapshot_the_consent_dialog(snap_compare: Any) -> None:
    from textual.app import App

    from ocat.mcp_client.consent import ConsentRequest

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(ConsentDialog(ConsentRequest("files", "read_file",
                                                          {"path": "~/notes/plan.md", "lines": [1, 40]}),
                                           arming_delay=3600))

    async def armed(pilot: Any) -> None:  # as the user sees it once answers count (not waiting on the clock)
        await pilot.pause()
        assert isinstance(pilot.app.screen, ConsentDialog)
        pilot.app.screen.arm()
        await pilot.pause()

    assert snap_compare(Host(), terminal_size=(80, 24), run_before=armed)


# -- the line mode and the process tree ---------------------------------------------------------------


def _read_until(fd: int, marker: str, seen: list[str], timeout: float = 90) -> str:
    """What the terminal showed, read until `marker` appears (AssertionError after `timeout`)."""
    deadline = time.monotonic() + timeout
    while marker not in "".join(seen):
        if time.monotonic() > deadline:
            raise AssertionError(f"{marker!r} never came; the terminal showed:\n{''.join(seen)[-2000:]}")
        if readable(fd, 0.5):
            try:
                seen.append(os.read(fd, 65536).decode(errors="replace"))
            except OSError:
                break
    return "".join(seen)


@contextlib.contextmanager
def line_mode_on_a_terminal(cli: Cli, llm_server: FakeLLMServer,
                            config: Path) -> Iterator[tuple[subprocess.Popen[bytes], int, list[str]]]:
    """`ocat --plain` with the config's servers on a pseudo-terminal (TERM=dumb), once its greeting
    is shown: the process, the terminal's other side, and what it showed so far. Killed at the end
    if it still runs."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(python_command("-m", "ocat", "--plain", *ask_args(llm_server, config),
                                              env=cli.environ({"TERM": "dumb"})),
                               stdin=terminal, stdout=terminal, stderr=terminal, env=cli.environ({"TERM": "dumb"}),
                               cwd=cli.home, close_fds=True)
    os.close(terminal)
    seen: list[str] = []
    try:
        _read_until(controller, "to leave", seen)
        yield process, controller, seen
    finally:
        if process.poll() is None:
            process.kill()
        os.close(controller)


@pytest.mark.slow
def test_the_line_mode_asks_on_a_terminal_and_one_letter_answers(
    cli: Cli, llm_server: FakeLLMServer, tmp_path: Path
) -> None:
    config = write_config(cli, {"fx": fixture_entry(tmp_path, cold=True)})  # looked for once ocat ends
    llm_server.script = [[{"name": "fx__write_note", "arguments": {"text": "call mum"}}], "Noted it."]
    with line_mode_on_a_terminal(cli, llm_server, config) as (process, controller, seen):
        os.write(controller, b"write it down\r")
        _read_until(controller, 'Allow fx.write_note {"text": "call mum"}? [y]es once, [a]lways, [n]o:', seen)
        assert not (tmp_path / "note.txt").exists()
        os.write(controller, b"y\r")
        _read_until(controller, "Noted it.", seen)
        os.write(controller, b"/quit\r")
        assert process.wait(timeout=60) == 0
    assert (tmp_path / "note.txt").read_text() == "call mum\n"
    assert not pid_alive(calls_made(tmp_path)[0]["pid"])  # a normal quit leaves no server behind


@pytest.mark.slow
def test_sigterm_mid_call_leaves_no_server_behind(cli: Cli, llm_server: FakeLLMServer, tmp_path: Path) -> None:
    config = write_config(cli, {"fx": fixture_entry(tmp_path, timeout=600)})
    llm_server.script = [[{"name": "fx__hang", "arguments": {}}], "Never."]
    process = subprocess.Popen(python_command("-m", "ocat", "--plain",
                                              *ask_args(llm_server, config, "--allow-tool", "fx.hang"), env=cli.environ()),
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=cli.environ(), cwd=cli.home)
    assert process.stdin is not None
    process.stdin.write("wait forever\n")
    process.stdin.flush()
    deadline = time.monotonic() + 90
    while not any(call["tool"] == "hang" for call in calls_made(tmp_path)):
        assert time.monotonic() < deadline and process.poll() is None, process.communicate()[1]
        time.sleep(0.2)
    pid = calls_made(tmp_path)[0]["pid"]
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    # The line mode keeps what memory has not taken, ends the servers and leaves as /quit does,
    # with the signal's code (ocat.process_end.keep_on_signals); it must not wait for the hanging call.
    assert process.returncode == 128 + signal.SIGTERM, err
    deadline = time.monotonic() + 10
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not pid_alive(pid)
