"""The full-screen chat gives the terminal back on SIGTERM and SIGHUP (`ocat.ui.terminal_restore`):
it used to die on the spot in the alternate screen, raw, the cursor hidden, and `reset` was needed.
"""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path
from typing import Callable

import pytest

from ocat.ui.terminal_restore import RESTORE
from tests.support.cli import Cli
from tests.support.fakes import FakeLLMServer
from tests.support.readable import readable
from tests.unit.test_mcp_client import fixture_entry, write_config


def _read_until(fd: int, done: Callable[[bytes], bool], seconds: float) -> bytes:
    """What the chat wrote to its terminal until `done(what it wrote)` holds, or `seconds` pass."""
    seen = bytearray()
    deadline = time.monotonic() + seconds
    while not done(bytes(seen)) and time.monotonic() < deadline:
        if readable(fd, 0.1):
            try:
                seen += os.read(fd, 65536)
            except OSError:
                break
    return bytes(seen)


@pytest.mark.slow
@pytest.mark.parametrize(("which", "with_server"), [(signal.SIGTERM, True), (signal.SIGTERM, False),
                                                     (signal.SIGHUP, False)])
def test_a_signal_leaves_the_terminal_as_the_chat_found_it(
    cli: Cli, llm_server: FakeLLMServer, which: signal.Signals, with_server: bool
) -> None:
    """The chat in a pty, as a user runs it; the signal comes once it has painted. With an MCP
    server, the handler the client set (its servers' families ended) still runs after."""
    config = write_config(cli, {"fx": fixture_entry(cli.home)} if with_server else {})
    env = {**cli.environ(), "TERM": "xterm-256color", "COLUMNS": "80", "LINES": "24"}
    controller, terminal = pty.openpty()
    cooked = termios.tcgetattr(terminal)
    chat = subprocess.Popen([sys.executable, "-m", "ocat", "--config", str(config), "--no-vector-store",
                             "--model", "openai/fake-model", "--set", f"llm.api_base={llm_server.api_base}",
                             "--set", "llm.api_key=sk-test", "--set", "tools.enabled=on"],
                            stdin=terminal, stdout=terminal, stderr=terminal, env=env, cwd=cli.home,
                            start_new_session=True)
    try:
        painted = _read_until(controller, lambda seen: b"\x1b[?1049h" in seen and b"fake-model" in seen, 60)
        assert b"fake-model" in painted, painted[-2000:]
        assert termios.tcgetattr(terminal)[3] & termios.ECHO == 0  # raw: the chat reads keys itself
        _read_until(controller, lambda seen: False, 1.0)  # the servers started, the window settled
        chat.send_signal(which)
        said = _read_until(controller, lambda seen: chat.poll() is not None, 60)
        said += _read_until(controller, lambda seen: False, 0.3)  # what was written as it ended
        # It still ends of the signal: killed by it, or (a chat that quits on it) with 128 + its number.
        assert chat.poll() in (-which, 128 + which)
        assert said.endswith(RESTORE.encode()) and said.endswith(b"\x1b[?1049l"), said[-300:]
        for mode in (b"\x1b[?25h", b"\x1b[?1000l", b"\x1b[?1003l", b"\x1b[?1006l", b"\x1b[?2004l"):
            assert mode in said
        modes = termios.tcgetattr(terminal)
        assert modes[3] & (termios.ECHO | termios.ICANON) == cooked[3] & (termios.ECHO | termios.ICANON)
    finally:
        if chat.poll() is None:
            chat.kill()
            chat.wait(10)
        os.close(controller)
        os.close(terminal)


def test_no_terminal_is_no_error(tmp_path: Path) -> None:
    """Noting the modes of a stdin that is a file (termios.error, not an OSError) stopped the chat
    from starting; giving back a terminal that is gone is no error either."""
    from ocat.ui.terminal_restore import remember_terminal, restore_terminal

    with open(tmp_path / "not-a-terminal", "w+") as plain_file:
        remember_terminal(plain_file.fileno())
        gone = os.dup(plain_file.fileno())
    os.close(gone)
    restore_terminal(gone)


def _own_terminal() -> None:
    """In the child, after its new session: make the pty on stdin its controlling terminal, as a
    terminal emulator's shell has, so that closing the terminal hangs it up (SIGHUP)."""
    import fcntl

    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


@pytest.mark.slow
def test_closing_the_terminal_ends_the_chat_and_keeps_the_answer(cli: Cli, llm_server: FakeLLMServer) -> None:
    """The terminal closes under the chat (its window shut, `tmux kill-session`) just after an answer
    came: the process ends within a moment, the answer in the store or in the kept file that the
    next start writes. Once (tmux, during a long answer) Textual's way out waited for ever on its
    output thread, the process holding the store; the window now leaves without Textual when it
    has not left HANGUP_GRACE after SIGHUP (ocat.ui.memory_view)."""
    llm_server.reply = "The spare key is under the blue pot."
    env = {**cli.environ(), "TERM": "xterm-256color", "COLUMNS": "100", "LINES": "30"}
    controller, terminal = pty.openpty()
    chat = subprocess.Popen([sys.executable, "-m", "ocat", "--model", "openai/fake-model",
                             "--set", f"llm.api_base={llm_server.api_base}", "--set", "llm.api_key=sk-test"],
                            stdin=terminal, stdout=terminal, stderr=terminal, env=env, cwd=cli.home,
                            start_new_session=True, preexec_fn=_own_terminal)
    os.close(terminal)  # the chat holds the only other end: closing ours hangs it up
    try:
        painted = _read_until(controller, lambda seen: b"fake-model" in seen and b"exchanges" in seen, 90)
        assert b"fake-model" in painted, painted[-2000:]
        _read_until(controller, lambda seen: False, 1.0)
        os.write(controller, b"where is the spare key?\r")
        answered = _read_until(controller, lambda seen: b"blue pot" in seen, 60)
        assert b"blue pot" in answered, answered[-2000:]
        # As tmux closes a pane: the shell's process group is sent SIGHUP while nobody reads the
        # terminal any more, then the terminal goes. Here the chat is sent it straight.
        os.write(controller, b"x" * 64)  # a key or two typed meanwhile: the window redraws
        chat.send_signal(signal.SIGHUP)
        time.sleep(3)
        os.close(controller)  # the terminal is gone
        controller = -1
        deadline = time.monotonic() + 40
        while chat.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert chat.poll() is not None, "the chat stayed on a terminal that was gone"
    finally:
        if chat.poll() is None:
            chat.kill()
            chat.wait(10)
        if controller >= 0:
            os.close(controller)
    found = cli("--query-vector-store", "spare key", "--output", "json")
    assert found.returncode == 0, found.stderr
    assert "blue pot" in found.stdout
