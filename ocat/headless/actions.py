"""One-shot actions from the shell: add, query, stats, ask, export, import.

Results go to stdout (plain text, or one JSON document with `--output json`); messages
and progress go to stderr. Expected failures are one line and an exit code, no traceback.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable
import asyncio
import os

from ocat.errors import InputFileError, OcatError, ProviderError, UsageError
from ocat.headless.common import open_configured_store, ready_model as _ready_model, say_to_stderr as _say_to_stderr
from ocat.headless.common import write_kept as _write_kept
from ocat.process_end import end_by_signal, keep_on_signals
from ocat.headless.output import Reporter, read_stdin
from ocat import llm, memory
from ocat.chat.outcomes import TextPiece, ToolFinished, ToolStarted, remembered_words, secrets_words
from ocat.chat.session import open_chat
from ocat.operations.search import ADMITTED_LEGEND, dated_note, hit_record, HitLine, reasons, search
from ocat.operations.wake import build_wake, pin, pins, unpin
from ocat.records import ONE_SHOT
from ocat.text.terminal import printable
from ocat.tools.server_tools import ServerTools
from ocat.logs import log_failure
from ocat.operations.stores import check_named_stores, made_note
from ocat.operations.add import add_file_or_folder, progress_printer

if TYPE_CHECKING:
    from ocat.config.loading import Settings
    from ocat.memory import MemoryStore
    from ocat.operations.search import Found
    from ocat.chat.turn import Turn


def run_action(action: str, args: argparse.Namespace, settings: Settings, reporter: Reporter) -> int:
    """Run one headless action and return the exit code."""
    reporter.config_path = settings.config_path
    reporter.model = "dummy" if args.dummy_mode else settings.llm.model
    handler: Callable[[argparse.Namespace, Settings, Reporter], int] = _HANDLERS[action]
    try:
        new_store = None
        if args.stores and action != "fetch-model":
            new_store = check_named_stores(action, args.stores, args.configured_store, settings)
        code = handler(args, settings, reporter)
        if new_store is not None:
            made = made_note(new_store)
            if made:
                reporter.note(f"ocat: {made}")
        return code
    except OcatError as exc:
        return reporter.fail(exc)
    except KeyboardInterrupt:
        if action in ("add", "import"):
            # Whole batches were stored; their ids are content-derived or recorded, so a rerun adds only the rest.
            reporter.note("ocat: interrupted; what was stored is kept, and running the same command again completes it")
        else:
            reporter.note("ocat: interrupted")
        return 130
    except BrokenPipeError:
        # The reader went away (`ocat --export-memory - | head`): stop quietly, like cat does.
        _silence_stdout()
        return 0
    except Exception as exc:  # a bug: one line and the log's name, not a traceback
        return reporter.fail(OcatError(log_failure(f"the {action} action", exc)))


def _silence_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _fetch_model(args: argparse.Namespace, settings: Settings, reporter: Reporter) -> int:
    # Thorough: the model's cached graph is checked against the model's own digest too.
    fetched = _ready_model(settings, reporter, thorough=True)
    if fetched is None:
        text = f"embedding.model is {settings.embedding.model}, a litellm model: there is nothing to download"
        return reporter.succeed({"model": settings.embedding.model, "path": None, "downloaded_bytes": 0,
                                 "graph_cache": None}, text)
    result = {
        "model": settings.embedding.model, "path": str(fetched.path), "downloaded_bytes": fetched.downloaded_bytes,
        "graph_cache": fetched.graph.to_dict() if fetched.graph is not None else None,
    }
    # A download already said where it went, on stderr; stdout gets the folder (for scripts).
    return reporter.succeed(result, str(fetched.path) if fetched.downloaded else fetched.describe())


def _open_stores(settings: Settings, args: argparse.Namespace) -> list[MemoryStore]:
    """The stores `--store` named (`ocat.cli` parsed them into `args.stores`; several are for
    reading), else the configured one."""
    if len(args.stores) <= 1:
        return [open_configured_store(settings)]
    return memory.open_stores(settings, args.stores, notify=_say_to_stderr)


def _stats(args: argparse.Namespace, settings: Settings, reporter: Reporter) -> int:
    from ocat.operations.stats import config_row, stats, stats_legend, stats_rows  # noqa: PLC0415 - each action loads its operation

    found = stats(_open_stores(settings, args), settings)
    selected = [asdict(one) for one in found.selected]
    if len(selected) == 1:
        result: dict[str, Any] = selected[0] | {"stores": found.available}
    else:
        result = {"stores": found.available, "selected": selected}
    text = "\n\n".join("\n".join(f"{key}: {value}" for key, value in stats_rows(one)) for one in found.selected)
    key, value = config_row(settings)
    text += f"\nstores: {', '.join(found.available)}\n{key}: {value}\n({stats_legend()})"
    return reporter.succeed(result, text)


def _add(args: argparse.Namespace, settings: Settings, reporter: Reporter) -> int:
    path = Path(args.add_to_vector_store).expanduser()
    if not path.exists():  # before the model's download or a wait for the store
        raise InputFileError(f"no such file or folder: {path}")
    _ready_model(settings, reporter)
    store = open_configured_store(settings)
    _write_kept(settings, store, reporter)
    outcome = add_file_or_folder(
        store,
        path,
        settings.chunking,
        source="cli",
        file_started=(lambda file: reporter.note(f"adding {file}")) if path.is_dir() else None,
        # A long document's progress on stderr, so a 50 MB file is not a silent wait.
        chunks_stored=progress_printer(reporter.note),
        notify=lambda message: reporter.note(f"ocat: warning: {message}"),
    )
    return reporter.succeed(outcome.to_json(), outcome.sentence())


def format_hits(found: list[Found], *, with_stores: bool = False) -> str:
    """Hits as a ranked, aligned plain-text list with each hit's short id (for `/vget`, `/vdelete`);
    each hit's store too when several were searched."""
    if not found:
        return "No memories found."
    lines = []
    id_width = max(len(one.shown_id) for one in found)
    for rank, one in enumerate(found, start=1):
        words = HitLine.of(one.hit, one.why)
        store = f"  [{one.store}]" if with_stores else ""
        where = f"{words.origin}{store}"
        head = f"{rank:>2}. {words.marked_score:<5} {one.hit.kind:<8} {one.shown_id.ljust(id_width)}"
        lines.append(f"{head}  {words.when}  {where}  ({words.why})")
        lines.append(f"    {one.hit.excerpt(100)}")
    lines.append(f"({ADMITTED_LEGEND})")
    if note := dated_note([one.hit for one in found]):
        lines.append(f"({note})")
    return "\n".join(lines)


def _query(args: argparse.Namespace, settings: Settings, reporter: Reporter) -> int:
    filters = memory.parse_where(getattr(args, "where", None) or [])
    queries = _stdin_lines(reporter) if args.query_vector_store == "-" else [args.query_vector_store]
    if args.query_vector_store != "-" and not queries[0].strip():
        raise UsageError("the query is empty")
    _ready_model(settings, reporter)
    stores = _open_stores(settings, args)
    _write_kept(settings, stores[0], reporter)  # the first is the configured store (ocat.cli.dispatch.overrides_from)
    for index, query in enumerate(queries):
        reporter.restart_clock()
        found = search(stores, query, settings.vector_store, count=args.results, filters=filters,
                       short_ids=reporter.output == "text", project=_only_project(settings),
                       now=getattr(args, "now", None))
        result = {"query": query, "results": [hit_record(f.hit, why=f.why, store=f.store) for f in found.found]}
        text = format_hits(found.found, with_stores=len(stores) > 1)
        if len(queries) > 1 or args.query_vector_store == "-":
            text = ("\n" if index else "") + f"# {query}\n{text}"
        reporter.succeed(result, text)
    return 0


def _only_project(settings: Settings) -> Any:
    """`--project PATH`: the exchanges of that project only (None: every project alike, as a query always was)."""
    if settings.project is None:
        return None
    return memory.ProjectScope(settings.project, "only")


def _stdin_lines(reporter: Reporter) -> list[str]:
    return [line.strip() for line in read_stdin(reporter, "a query").split("\n") if line.strip()]


def _ask(args: argparse.Namespace, settings: Settings, reporter: Reporter) -> int:
    prompt = read_stdin(reporter, "the prompt") if args.ask == "-" else args.ask
    if not prompt.strip():
        raise UsageError("nothing to ask: the prompt is empty")
    problem = None if args.dummy_mode else llm.credentials_problem(settings.llm)
    if problem:
        raise ProviderError(problem)
    session = open_chat(settings, dummy=args.dummy_mode, serve=False, stream=reporter.stderr)
    session.origin = ONE_SHOT  # the wake block groups one-shot questions (operations.wake)
    session.now = getattr(args, "now", None)  # --now: time words in the question read against that day
    # SIGTERM or SIGHUP: what memory has not taken is kept in a file, then the closing below runs.
    restore = keep_on_signals(session.session_memory, end_by_signal)
    try:
        # Before the question: a name no server has is refused (exit 2), its servers' lists at hand.
        for warning in session.server_tools.check_allowed(args.allow_tool, learn=True):
            reporter.note(f"ocat: warning: {warning}")
        if session.session_memory.loaded is not None and session.session_memory.loaded.recovered:
            reporter.note(f"ocat: {session.session_memory.loaded.recovered}")
        turn = session.turn(prompt)
        turn.recall()
        if turn.problem:  # the search failed; the question is still answered, and remembered
            reporter.note(f"ocat: warning: {turn.problem}")
        asyncio.run(_answer_with_tool_lines(turn, reporter))
        turn.finish()
        if session.session_memory.error:  # memory never came up (dummy mode too), or went down in this turn
            reporter.note(f"ocat: warning: memory is off: {session.session_memory.error}")
        elif turn.recorded is not None and (said := remembered_words(turn.recorded)) is not None:
            reporter.note(f"ocat: warning: {said[0]}")
        if turn.recorded is not None and (secrets := secrets_words(turn.recorded)) is not None:
            reporter.note(f"ocat: note: {secrets}")
    finally:
        closing = session.close()  # what memory could not take is kept for the next start, and said
        if closing:
            reporter.note(f"ocat: {closing}")
        restore()
    exchange = turn.exchange
    result = {
        "text": turn.text,
        "usage": (turn.usage or llm.Usage()).to_dict(),
        "memories": [hit_record(h, why=w) for h, w in zip(turn.memories, reasons(turn.memories))],
        "tool_calls": [call.kept().to_json() for call in turn.calls],
        "exchange_id": exchange.exchange_id if exchange is not None and turn.stored else None,
        # The kinds of the secrets memory did not keep (the model was sent them): one per secret.
        "secrets_not_kept": list(turn.recorded.secrets) if turn.recorded is not None else [],
    }
    return reporter.succeed(result, turn.text)


async def _answer_with_tool_lines(turn: Turn, reporter: Reporter) -> None:
    """The whole answer; each tool call, once it has its result, is one line on stderr."""
    async for event in turn:
        match event:
            case ToolFinished(call):
                reporter.note(f"ocat: · {printable(call.line())}")
            case TextPiece() | ToolStarted():
                pass  # the answer is printed whole, at the end (`turn.text`)
    for note in turn.tool_notes:
        reporter.note(f"ocat: note: {printable(note)}")


def _wake(args: argparse.Namespace, settings: Settings, reporter: Reporter) -> int:
    store = None
    if settings.vector_store.enabled:
        _ready_model(settings, reporter)
        store = open_configured_store(settings)
    block = build_wake(settings, store, project=settings.project)
    for note in block.notes:
        reporter.note(f"ocat: {note}")
    return reporter.succeed(block.to_dict(), block.text() or "The wake block is empty (no pins, profile or threads).")


def _pin(args: argparse.Namespace, settings: Settings, reporter: Reporter) -> int:
    store = open_configured_store(settings)
    if args.pin is not None:
        record_id = pin(store, args.pin)
        return reporter.succeed({"id": record_id, "pinned": True}, f"Pinned {record_id}")
    record_id = unpin(store, args.unpin)
    return reporter.succeed({"id": record_id, "pinned": False}, f"Unpinned {record_id}")


def _pins(args: argparse.Namespace, settings: Settings, reporter: Reporter) -> int:
    found = pins(open_configured_store(settings))
    text = "\n".join(line for _, line in found) or "No pinned memories."
    return reporter.succeed({"pins": [{"id": i, "line": line} for i, line in found]}, text)


def _check(args: argparse.Namespace, settings: Settings, reporter: Reporter) -> int:
    from ocat.operations.health import PROBLEMS_FOUND, check, health_record  # noqa: PLC0415 - each action loads its operation

    found = check(settings, notify=_say_to_stderr)
    reporter.succeed(health_record(found), "\n".join(found.lines()))
    return 0 if found.healthy else PROBLEMS_FOUND


def _repair(args: argparse.Namespace, settings: Settings, reporter: Reporter) -> int:
    from ocat.operations.health import PROBLEMS_FOUND, repair, repair_record  # noqa: PLC0415 - each action loads its operation

    done = repair(settings, notify=_say_to_stderr, accept_smaller=args.accept_smaller_store)
    reporter.succeed(repair_record(done), "\n".join(done.lines()))
    return 0 if done.after.healthy else PROBLEMS_FOUND


def _redact_secrets(args: argparse.Namespace, settings: Settings, reporter: Reporter) -> int:
    store = open_configured_store(settings)
    found = memory.secrets_in_store(store)
    if not found.records:
        return reporter.succeed(asdict(found), found.sentence())
    if not args.yes:
        asked = (f"{found.line().removeprefix('secrets: ').split(';')[0]}. Replace them with placeholders, "
                 "in place (no copy of them is kept)? [y/N] ")
        if not sys.stdin.isatty():
            raise UsageError(f"{found.line()}; nothing changed: --redact-secrets asks first, and stdin is not a "
                             "terminal (add --yes to run it without asking)")
        sys.stderr.write(asked)
        sys.stderr.flush()
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            return reporter.succeed(asdict(memory.SecretsInStore(found.records, found.kinds)),
                                    "Nothing was changed.")
    done = memory.redact_store(store)
    return reporter.succeed(asdict(done), done.sentence())


# How long `--list-tools` waits for servers still starting (a first `npx -y` may take minutes).
LIST_WAIT_SECONDS = 600.0


def _say_starting(names: list[str], seconds: float) -> None:
    """`--list-tools`'s progress line (on stderr): which servers it is still waiting for."""
    _say_to_stderr(f"waiting for MCP server{'s' if len(names) > 1 else ''} {', '.join(names)} to start "
                   f"({seconds:.0f} s; a first run may be downloading it)")


def _list_tools(args: argparse.Namespace, settings: Settings, reporter: Reporter) -> int:
    from ocat.tools.listing import render_listing, tool_listing  # noqa: PLC0415 - each action loads its operation

    servers = ServerTools(settings)
    try:
        if servers.servers is not None:  # every server, however long it takes: this prepares them too
            servers.servers.wait_all(LIST_WAIT_SECONDS, _say_starting)
        listing = tool_listing(servers)
    finally:
        servers.close()
    return reporter.succeed({"servers": listing}, render_listing(listing, asks=False))


def _transfer(name: str) -> Callable[[argparse.Namespace, Any, Reporter], int]:
    """The action `name` of ocat.headless.transfer, imported when it runs: the export code and the
    readers of old chats are not loaded for `--ask` or a query."""

    def run(args: argparse.Namespace, settings: Settings, reporter: Reporter) -> int:
        from ocat.headless import transfer  # noqa: PLC0415 - a seam: each action loads what it runs

        handler: Callable[[argparse.Namespace, Settings, Reporter], int] = getattr(transfer, name)
        return handler(args, settings, reporter)

    return run


_HANDLERS: dict[str, Callable[[argparse.Namespace, Any, Reporter], int]] = {
    "list-tools": _list_tools,
    "import-history": _transfer("import_history_action"),
    "wake": _wake,
    "pin": _pin,
    "unpin": _pin,
    "pins": _pins,
    "check": _check,
    "repair": _repair,
    "redact-secrets": _redact_secrets,
    "stats": _stats,
    "add": _add,
    "query": _query,
    "ask": _ask,
    "export": _transfer("export_action"),
    "import": _transfer("import_action"),
    "fetch-model": _fetch_model,
}
