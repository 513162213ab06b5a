"""The one-shot actions that move memory in and out: `--export-memory`, `--import-memory` (ocat's
own records) and `--import-history` (other chats' exports, coding agents' sessions).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from ocat.errors import Cancelled, OcatError, UsageError
from ocat.headless.common import open_configured_store, ready_model, write_kept
from ocat.headless.output import EtaPrinter, Reporter, stop_on_interrupt
from ocat.text.terminal import count_of
from ocat import memory
from ocat.history_import import ConversationProblem, detect_format, exports_in, hook_transcript
from ocat.input_files import refuse_special, spooled_stdin, STDIN
from ocat.operations.history import import_history, is_ocat_export
from ocat.operations.history_exports import import_exports
from ocat.operations.history_sessions import default_sessions
from ocat.operations.transfer import check_import, export_to_file, export_to_stream, import_file

if TYPE_CHECKING:
    from ocat.config.loading import Settings
    from ocat.history_import import FolderExports


def export_action(args: argparse.Namespace, settings: Settings, reporter: Reporter) -> int:
    store = open_configured_store(settings)
    if args.export_memory == "-":
        if reporter.output == "json":
            raise UsageError("--export-memory - writes the records to stdout; it cannot be combined with --output json")
        export_to_stream(store, sys.stdout)
        return 0
    path = Path(args.export_memory).expanduser()
    outcome = export_to_file(store, path)
    counts = [count_of(outcome.exchanges, "exchange"), count_of(outcome.documents, "document chunk")]
    if outcome.titles:
        counts.append(count_of(outcome.titles, "thread title"))
    text = f"Exported {', '.join(counts[:-1])} and {counts[-1]} to {path}"
    result = {
        "path": outcome.path, "exchanges": outcome.exchanges, "documents": outcome.documents,
        "records": outcome.records, "titles": outcome.titles,
    }
    return reporter.succeed(result, text)


def import_action(args: argparse.Namespace, settings: Settings, reporter: Reporter) -> int:
    if args.import_memory == STDIN:
        with spooled_stdin() as path:
            return _import_path(path, settings, reporter)
    return _import_path(Path(args.import_memory).expanduser(), settings, reporter)


def _import_path(path: Path, settings: Settings, reporter: Reporter) -> int:
    # The whole file is checked first: a bad line fails before a model download or a wait for the store.
    checked = check_import(path)
    ready_model(settings, reporter)
    progress = memory.throttled_progress(lambda done, total: reporter.note(f"imported {done}/{total} records"))
    store = open_configured_store(settings)
    write_kept(settings, store, reporter)
    outcome = import_file(store, path, checked, progress)
    skipped = outcome.records - outcome.added
    text = f"Imported {count_of(outcome.added, 'record')} from {path}"
    if skipped:
        text += f"; {skipped} already stored"
    if outcome.titles_added:
        text += f"; {count_of(outcome.titles_added, 'thread title')} restored"
    return reporter.succeed(asdict(outcome) | {"records": outcome.records}, text)


def import_history_action(args: argparse.Namespace, settings: Settings, reporter: Reporter) -> int:
    fmt = args.history_format
    if args.import_history == STDIN:
        with spooled_stdin() as path:
            # A Claude Code hook sends a small JSON object naming the session it just finished.
            transcript = hook_transcript(path) if fmt in (None, "claude-code") else None
            if transcript is not None:
                return _import_hook(transcript, settings, reporter)
            return _import_history_path(path, fmt, settings, reporter)
    if not args.import_history:  # no PATH: the coding agents' own session folders
        held = default_sessions(fmt)
        first, first_format = held.found[0]
        return _import_history_path(first, first_format, settings, reporter, held if held.several else None)
    return _import_history_path(Path(args.import_history).expanduser(), fmt, settings, reporter)


def _import_hook(transcript: Path, settings: Settings, reporter: Reporter) -> int:
    """A Claude Code hook's import of the session it names: nothing on stdout when it worked; a
    failure is one line on stderr and exit 1, never 2 (which a Stop hook reads as "keep going")."""
    def said(line: str) -> None:
        reporter.note(f"ocat: {line}")

    try:
        refuse_special(transcript)  # as a PATH is: a FIFO would hang, /dev/zero never end
        ready_model(settings, reporter)
        with stop_on_interrupt(reporter) as stopping:

            def step(label: str, done: int, total: int) -> None:
                if stopping.is_set():
                    raise Cancelled("stopped")

            def skipped(p: ConversationProblem) -> None:
                said(f"skipped {p.title or p.source_id or 'the session'}: {p.problem}")

            outcome = import_history(
                open_configured_store(settings), transcript, "claude-code", progress=step, problem=skipped, warn=said
            )
    except OcatError as exc:
        said(f"the Claude Code session {transcript} was not imported: {exc}")
        return 1
    reporter.succeed(outcome.to_dict(), None)
    return 130 if outcome.stopped else 0


def _import_history_path(
    path: Path, fmt: str | None, settings: Settings, reporter: Reporter, several: FolderExports | None = None
) -> int:
    refuse_special(path)  # before the first look at it: a pipe would block, a device never end
    if fmt == "ocat" or (fmt is None and is_ocat_export(path)):
        return _import_path(path, settings, reporter)  # ocat's own export: the same import as --import-memory
    held = several or (exports_in(path) if fmt is None else None)
    # A file of another shape fails before a model download.
    chosen = None if held is not None and held.several else fmt or detect_format(path)
    ready_model(settings, reporter)
    store = open_configured_store(settings)
    eta = EtaPrinter(reporter.note, "conversations")
    with stop_on_interrupt(reporter) as stopping:

        def step(label: str, done: int, total: int) -> None:
            eta(done, total)
            if stopping.is_set():
                raise Cancelled("stopped")

        def skipped(p: ConversationProblem) -> None:
            reporter.note(f"ocat: skipped {p.title or p.source_id or 'a conversation'}: {p.problem}")

        def warned(line: str) -> None:
            reporter.note(f"ocat: warning: {line}")

        if held is None or not held.several:
            outcome = import_history(store, path, chosen, progress=step, problem=skipped, warn=warned)
            code = reporter.succeed(outcome.to_dict(), outcome.sentence())
            return 130 if outcome.stopped else code
        # A folder of several exports (a ChatGPT zip, a Claude zip, logs.db): each one, a line each.
        done = import_exports(store, held, progress=step, problem=skipped, warn=warned)
    code = reporter.succeed(done.to_dict(), "\n".join(done.lines()))
    return 130 if done.stopped else (1 if done.failed else code)
