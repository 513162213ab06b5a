"""The log: tracebacks of unexpected failures, kept so the one line on screen can say where they are.

Every boundary (a slash command, a worker, a headless action) turns an exception it did not
expect into a message the user sees; the details go here rather than over the screen.
"""

from __future__ import annotations

import os
import time
import traceback
from pathlib import Path

from ocat.config.locations import display_path, state_dir
from ocat.text.redact import redact
from ocat.errors import OcatError

# Past this size the log starts afresh (the previous one is kept as ocat.log.1).
MAX_BYTES = 1_000_000


def log_file() -> Path:
    """Where tracebacks are written: `$XDG_STATE_HOME/ocat/ocat.log`."""
    return state_dir() / "ocat.log"


def log_failure(what: str, exc: BaseException) -> str:
    """Write `exc`'s traceback to the log; returns one line for the user naming the error and the log.

    Both are redacted: an exception's text (a provider's reply, a URL) can hold an API key.
    """
    path = log_file()
    where = f"details in {display_path(path)}"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size > MAX_BYTES:
            os.replace(path, path.with_name(path.name + ".1"))
        # backslashreplace: an exception's text can hold lone surrogates (undecodable bytes).
        with path.open("a", encoding="utf-8", errors="backslashreplace") as log:
            log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} pid {os.getpid()}: {what}\n")
            log.write(redact("".join(traceback.format_exception(exc))))
    except OSError as error:  # a log that cannot be written must not hide the failure itself
        where = f"the log {display_path(path)} could not be written: {error.strerror or error}"
    return redact(f"{what} failed unexpectedly: {type(exc).__name__}: {exc} ({where})")


def failure_text(what: str, exc: BaseException) -> str:
    """What to tell the user of a failure: an expected one's own message (OcatError); anything
    else logged (log_failure), with where the log is."""
    return str(exc) if isinstance(exc, OcatError) else log_failure(what, exc)
