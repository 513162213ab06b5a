"""What the one-shot actions share: notes on stderr, the store opened, the model made ready.

stdout is the result's alone (a JSON document with `--output json`); all else goes to stderr.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING
from ocat import memory

if TYPE_CHECKING:
    from ocat.config.loading import Settings
    from ocat.headless.output import Reporter
    from ocat.memory import FetchResult, MemoryStore


def say_to_stderr(message: str) -> None:
    """One note on stderr, as ocat's notes are written."""
    print(f"ocat: {message}", file=sys.stderr)


def open_configured_store(settings: Settings) -> MemoryStore:
    """The configured store, opened; what opening does at length is said on stderr."""
    return memory.open_store(settings, notify=say_to_stderr)


def write_kept(settings: Settings, store: MemoryStore, reporter: Reporter) -> None:
    """Write what earlier chats on this store kept in a file (ocat.chat.unsaved), as every start
    on a store with the model ready does, saying so on stderr."""
    from ocat.chat.unsaved import save_unsaved_files  # noqa: PLC0415 - the actions that write load it

    said = save_unsaved_files(settings, store).sentence()
    if said:
        reporter.note(f"ocat: {said}")


def ready_model(settings: Settings, reporter: Reporter, *, thorough: bool = False) -> FetchResult | None:
    """Make sure the embedding model is there (downloading it on first use, with progress on
    stderr: stdout stays the result's); a download ends with one line saying where it went, and
    a damaged cached graph of it is made again with one line (`thorough`: ocat.memory.prepare_model)."""
    printer = memory.ProgressPrinter(reporter.stderr)
    fetched = None

    def say(line: str) -> None:
        reporter.stderr.write(f"ocat: {line}\n")
        reporter.stderr.flush()

    try:
        fetched = memory.prepare_model(settings.embedding, progress=printer, notify=say, thorough=thorough)
    finally:
        printer.finish(fetched)
    return fetched
