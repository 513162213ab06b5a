"""How an ocat process ends: at once, without Python's teardown.

A command that touched memory has loaded chromadb, onnxruntime and their dependencies, some
two thousand modules; finalising them all took 0.4-0.5 s of a 3 s `ocat --ask`
(docs/PERFORMANCE.md, "--ask against simonw/llm"). Nothing ocat keeps depends on that
teardown: every write is committed when the command returns (SQLite transactions, Chroma's
log), which is also what lets a crashed process lose nothing. So a command ends by os._exit
once the useful steps of a normal exit are done: threads that are not daemons have finished
(Python does that first, before the exit handlers), the exit handlers have run (the store's
lease given up, the passage backfill stopped), logs and streams are flushed.

The full-screen chat leaves sooner still, when its window closes (`leave_now`).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

from ocat.text.terminal import printable

if TYPE_CHECKING:
    from ocat.chat.session import ChatSession

# How long the process waits, once the window has closed, for the store to be given up.
CLOSE_WAIT_SECONDS = 0.2
# How long it waits when exchanges were not in memory yet: they are kept in a file first
# (a moment), then tried once more (ocat.chat.session.ChatSession.close).
KEEP_WAIT_SECONDS = 10.0

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
    _end_servers()
    os._exit(_exit_code)


def leave_now(code: int, closing: threading.Thread | None, session: ChatSession | None = None) -> NoReturn:
    """Leave at once when the chat window closes, whatever is still shutting down.

    Python would otherwise wait for every worker thread (litellm still importing, memory
    still opening) and for the store's server to stop. The store is given up if that takes
    less than CLOSE_WAIT_SECONDS; past that the process ends as a crashed owner does, which
    the store is made for: the OS releases the owner lock and the server's watchdog stops it
    (ocat.memory.sharing.owner_lock). Every exchange was written when its turn ended. The MCP
    servers' processes, which the closing thread may not have stopped yet, are ended here.
    """
    unsaved = session is not None and bool(session.memory.unsaved)
    if closing is not None:
        closing.join(timeout=KEEP_WAIT_SECONDS if unsaved else CLOSE_WAIT_SECONDS)
    if session is not None and session.memory.unsaved_note:
        # Said once the window is gone, on the terminal it leaves: what became of what memory could not take.
        print(f"ocat: {printable(session.memory.unsaved_note)}", file=sys.stderr)
    _flush_streams()
    _end_servers()
    os._exit(code)


def _end_servers() -> None:
    """End what is left of the MCP servers' processes (none started: nothing to do). A process
    that ends by os._exit runs no exit handler, and a server that ignores its stdin closing, or
    the child a server left behind, would outlive it (SIGTERM, a short grace, SIGKILL)."""
    if "ocat.mcp_client.server_processes" in sys.modules:  # loaded only where a server was started
        from ocat.mcp_client.server_processes import end_all  # noqa: PLC0415 - see above

        end_all()


def _flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that went away, a stream already closed
            pass
