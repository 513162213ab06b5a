"""The terminal given back as the full-screen chat found it, however the process ends: on SIGTERM
or SIGHUP, Python's default is to die on the spot, which left the terminal in the alternate
screen, raw, with the mouse reporting and the cursor hidden (the user had to type `reset`).

`restore_terminal` is the one place that undoes what the chat's driver set; `restore_on_signals`
calls it before a signal ends the chat, then lets the signal do what it did before.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from ocat.process_end import end_servers

# What Textual's driver turns on, turned off, the alternate screen left last (a terminal that
# reads only part of this still gives the user's screen back): mouse reporting (1000, 1002,
# 1003, 1006, 1007, 1015, 1016), focus events (1004), bracketed paste (2004), in-band resize
# (2048), the kitty keyboard protocol (<u), line wrapping back on (7), the cursor shown (25).
RESTORE = ("\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1007l\x1b[?1015l\x1b[?1016l"
           "\x1b[?1004l\x1b[?2004l\x1b[?2048l\x1b[<u\x1b[?7h\x1b[?25h\x1b[?1049l")

# The signals that end the chat without Textual's own way out; SIGINT is a key to Textual.
ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)

# The terminal's modes before the chat made it raw (termios attributes), per descriptor.
_modes: dict[int, list[Any]] = {}


def remember_terminal(fd: int | None = None) -> None:
    """Note the terminal's modes (cooked, echoing) before the chat makes it raw, to give them back."""
    try:
        import termios  # noqa: PLC0415 - POSIX only
    except ImportError:  # no termios (Windows): nothing to give back
        return
    try:
        fd = sys.stdin.fileno() if fd is None else fd
        _modes[fd] = termios.tcgetattr(fd)
    except (OSError, ValueError, termios.error):  # no stdin, or not a terminal: nothing to give back
        pass


def restore_terminal(out: int | None = None) -> None:
    """Give the terminal back: every mode the chat turned on turned off, the alternate screen left,
    the cursor shown, the modes noted by `remember_terminal` set again. Safe to call twice, and
    from a signal handler; a terminal already gone (SIGHUP) is no error."""
    try:
        os.write(sys.__stdout__.fileno() if out is None else out, RESTORE.encode())  # type: ignore[union-attr]
    except (AttributeError, OSError, ValueError):  # no stdout, or one closed or gone
        pass
    try:
        import termios  # noqa: PLC0415 - POSIX only
    except ImportError:
        return
    for fd, modes in _modes.items():
        try:
            termios.tcsetattr(fd, termios.TCSANOW, modes)
        except (OSError, termios.error):
            pass


def restore_on_signals(signals: tuple[signal.Signals, ...] = ENDING_SIGNALS) -> None:
    """Before each of `signals` ends the chat, give the terminal back; then the handler that was
    set before runs (the MCP servers' families ended, say), or, if none was, the process dies
    of the signal as it did. A signal ignored (nohup) stays ignored. Call from the main thread,
    where handlers are set, before the chat starts (its modes are noted here)."""
    remember_terminal()
    for which in signals:
        before = signal.getsignal(which)
        if before == signal.SIG_IGN:  # `nohup ocat`: the chat goes on, on its screen
            continue

        def on_signal(signum: int, frame: Any, before: Any = before) -> None:
            restore_terminal()
            if callable(before):
                before(signum, frame)
                return
            end_servers()
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

        signal.signal(which, on_signal)
