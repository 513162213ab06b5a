"""How an ocat process ends: at once, without Python's teardown.

A command that touched memory has loaded chromadb, onnxruntime and their dependencies, some
two thousand modules; finalising them all took 0.4-0.5 s of a 3 s `ocat --ask`
(docs/PERFORMANCE.md, "--ask against simonw/llm"). Nothing ocat keeps depends on that
teardown: every write is committed when the command returns (SQLite transactions, Chroma's
log), which is also what lets a crashed process lose nothing. So a command ends by os._exit
once the useful steps of a normal exit are done: threads that are not daemons have finished
(Python does that first, before the exit handlers), the exit handlers have run (the store's
lease given up, the passage backfill stopped), logs and streams are flushed.

The full-screen chat leaves sooner still, when its window closes (`leave_now`). Every way out
of a chat (quitting, Ctrl+C, end of input, SIGTERM, SIGHUP: `keep_on_signals`) first keeps
what memory has not taken yet, including an exchange being written, in a file that the next
start writes (ocat.chat.session_memory.SessionMemory.spool).
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from ocat.config.locations import display_path
from ocat.text.terminal import count_of, printable

if TYPE_CHECKING:
    from ocat.chat.session import ChatSession
    from ocat.chat.session_memory import SessionMemory

# How long the process waits, once the window has closed, for the store to be given up.
CLOSE_WAIT_SECONDS = 0.2
# How long it waits when exchanges were not in memory yet (kept for later, or being written):
# they are kept in a file first (a moment), then written (ocat.chat.session.ChatSession.close).
KEEP_WAIT_SECONDS = 10.0
# The signals that end a chat as quitting does: `kill`'s default, and the terminal closing.
LEAVING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)

# Held by the one `leave_now` under way.
_leaving = threading.Lock()

# The code the process ends with; 1 until `main` returns one (an uncaught exception's code).
_exit_code = 1


def run_and_end(main: Callable[[], int]) -> NoReturn:
    """Run `main` and end the process with its code, skipping the interpreter's teardown."""
    global _exit_code
    # Registered before anything else of ocat's: exit handlers run last-registered first, so
    # this one runs after all the others.
    atexit.register(_end_after_exit_handlers)
    try:
        _exit_code = main()
    except SystemExit as exc:  # argparse's usage errors, `raise SystemExit(...)` deeper down
        _exit_code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        raise
    except KeyboardInterrupt:
        _exit_code = 130
        raise
    raise SystemExit(_exit_code)


def _end_after_exit_handlers() -> None:
    if "logging" in sys.modules:  # only a process that logged shuts logging down
        import logging  # noqa: PLC0415 - `--version` and `--help` end without loading it

        logging.shutdown()
    _flush_streams()
    end_servers()
    os._exit(_exit_code)


def leave_now(code: int, closing: threading.Thread | None, session: ChatSession | None = None) -> NoReturn:
    """Leave at once when the chat window closes, whatever is still shutting down.

    Python would otherwise wait for every worker thread (litellm still importing, memory
    still opening) and for the store's server to stop. The store is given up if that takes
    less than CLOSE_WAIT_SECONDS; past that the process ends as a crashed owner does, which
    the store is made for: the OS releases the owner lock and the server's watchdog stops it
    (ocat.memory.sharing.owner_lock). What memory has not taken yet (an exchange being written,
    or kept for later) is first kept in a file, then waited for, at most KEEP_WAIT_SECONDS,
    saying so. The MCP servers' processes, which the closing thread may not have stopped yet,
    are ended here.
    """
    # One way out at a time: the window's own, or the one a hung-up terminal takes
    # (ocat.ui.memory_view); a second caller waits here for the first to end the process.
    _leaving.acquire()
    note = settle(closing, session.session_memory if session is not None else None)
    if note:
        # Said once the window is gone, on the terminal it leaves: what became of what memory could not take.
        _say(note)
    _flush_streams()
    end_servers()
    os._exit(code)


def end_servers() -> None:
    """End what is left of the MCP servers' processes (none started: nothing to do). A process
    that ends by os._exit runs no exit handler, and a server that ignores its stdin closing, or
    the child a server left behind, would outlive it (SIGTERM, a short grace, SIGKILL)."""
    if "ocat.mcp_client.server_processes" in sys.modules:  # loaded only where a server was started
        from ocat.mcp_client.server_processes import end_all  # noqa: PLC0415 - see above

        end_all()


def settle(closing: threading.Thread | None, session_memory: SessionMemory | None) -> str | None:
    """`leave_now` before the process ends: keep what memory has not taken in a file, give the
    closing (`closing` runs the session's close) its while, and return what became of those
    exchanges, in words (None: nothing to say)."""
    if session_memory is not None:
        session_memory.spool()  # first: whatever happens next, no answer shown in full is lost
    if closing is not None:
        closing.join(timeout=CLOSE_WAIT_SECONDS)
        waiting = session_memory.waiting() if session_memory is not None else []
        if closing.is_alive() and session_memory is not None and waiting:
            spooled = session_memory.spooled.path
            where = f"; kept in {display_path(spooled)} meanwhile" if spooled else ""
            _say(f"writing {count_of(len(waiting), 'exchange')} to memory before leaving "
                 f"(up to {KEEP_WAIT_SECONDS:g} s{where})")
            closing.join(timeout=KEEP_WAIT_SECONDS)
    if session_memory is None:
        return None
    if closing is not None and not closing.is_alive():
        return session_memory.unsaved_note  # closing ended: it said what became of them
    session_memory.spool()  # what is still not in memory now
    return session_memory.leaving_words()


def keep_on_signals(session_memory: SessionMemory, leave: Callable[[int], Any]) -> Callable[[], None]:
    """On SIGTERM or SIGHUP, keep what memory has not taken in a file at once, then `leave(signum)`
    (the chat ends as if the user quit), ending the MCP servers' processes on the way. A handler
    set before (the MCP servers' own, which ends them and dies of the signal) is not run then: it
    would end the process before the chat leaves (the terminal given back, memory closed). A
    second signal finds it, or the default, and ends the process at once. Set from the main
    thread only (elsewhere nothing is set); returns what puts the earlier handlers back."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    before: dict[int, Any] = {sig: signal.getsignal(sig) for sig in LEAVING_SIGNALS}

    def on_signal(signum: int, frame: Any) -> None:
        previous = before.get(signum)
        signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        session_memory.spool()
        # The MCP servers' processes go first: a call waiting on one (in a worker thread the
        # chat's loop would wait for on its way out) then fails at once instead of holding the exit.
        end_servers()
        leave(signum)

    for sig in LEAVING_SIGNALS:
        signal.signal(sig, on_signal)

    def restore() -> None:
        if threading.current_thread() is threading.main_thread():
            for sig, previous in before.items():
                signal.signal(sig, previous if previous is not None else signal.SIG_DFL)

    return restore


def end_by_signal(signum: int) -> NoReturn:
    """What a line-mode chat or `--ask` does on SIGTERM or SIGHUP once the exchanges are kept
    (`keep_on_signals`): end as `/quit` would, closing memory on the way, with the signal's exit code."""
    raise SystemExit(128 + signum)


def _say(line: str) -> None:
    try:
        print(f"ocat: {printable(line)}", file=sys.stderr, flush=True)
    except (OSError, ValueError):  # a terminal that is gone (SIGHUP): what was kept is in its file all the same
        pass


def _flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that went away, a stream already closed
            pass
