"""The memory commands: /vquery, /vadd, /vdoc, /vget, /vdelete, /vstats."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from ocat.commands.arguments import Arg
from ocat.commands.registry import command, require_store, require_store_and_model
from ocat.commands.results import CommandResult, Confirm
from ocat.errors import UsageError
from ocat.text.limits import MAX_RESULTS, MIN_RESULTS
from ocat.config.locations import display_path
from ocat.records import Exchange
from ocat.text.terminal import count_of, local_time
from ocat.history_import import exports_in
from ocat.operations.add import add_file_or_folder, add_note
from ocat.operations.history import import_history
from ocat.operations.history_exports import import_exports
from ocat.operations.lookup import (
    delete_records,
    describe_record,
    get_record,
    record_details,
    record_id,
    record_markdown,
    short_id,
)
from ocat.operations.search import HitLine, search
from ocat.operations.stats import config_row, stats, stats_legend, stats_rows
from ocat.operations.versions import versions_markdown

if TYPE_CHECKING:
    from ocat.memory import MemoryStore
    from ocat.chat.session import ChatSession


# A /vquery excerpt as the command gives it: more than the widest terminal shows; each face
# cuts it to the width it has (CommandResult.fit_column).
EXCERPT_CHARS = 400


@command(
    "vquery",
    "search memory: rank, score, where from, date, excerpt", group="memory",
    arguments=(
        Arg("query", "a query", kind="text"),
        # The same rule and limits as `--results` (ocat.text.limits).
        Arg("count", "how many results", kind="int", optional=True, lo=MIN_RESULTS, hi=MAX_RESULTS,
            default_help="vector_store.context_results"),
    ),
    example='/vquery "what did we decide" 5',
)
def _vquery(session: ChatSession, query: str, count: int | None) -> CommandResult:
    store = require_store_and_model(session)
    found = search([store], query, session.settings.vector_store, count=count, short_ids=True)
    rows = []
    for rank, one in enumerate(found.found, start=1):
        words = HitLine.of(one.hit, one.why)
        rows.append((str(rank), one.shown_id, words.marked_score, words.why, words.origin, words.when,
                     one.hit.excerpt(EXCERPT_CHARS)))
    text = (f"{count_of(len(rows), 'result')} for {query!r} (* = given to the model in a chat, listed first; "
            "/vget ID shows one)") if rows else "No memories found."
    if found.dated:
        text += f"\n{found.dated[0].upper()}{found.dated[1:]}."
    return CommandResult(text=text, columns=("#", "id", "score", "why", "from", "date", "excerpt"), rows=rows,
                         fit_column=6)


@command("vadd", "store text as a memory", arguments=(Arg("text", "the text to remember", kind="rest"),),
         group="memory",
         example="/vadd the spare key is under the blue flowerpot")
def _vadd(session: ChatSession, text: str) -> CommandResult:
    return CommandResult(text=add_note(require_store_and_model(session), text, session.settings.chunking,
                                       source="vadd_command").sentence())


@command("vstats", "show the store's location and counts", group="memory")
def _vstats(session: ChatSession) -> CommandResult:
    found = stats([require_store(session)], session.settings)
    rows = [*stats_rows(found.selected[0], display_path), ("stores", ", ".join(found.available)),
            config_row(session.settings, display_path)]
    return CommandResult(text="Memory", columns=("key", "value"), rows=rows, markdown=stats_legend())


DOCS_PREFIX = "docs:"


def document_path(text: str, docs_folder: str | None) -> Path:
    """The file or folder `/vdoc` was given: a path, or `docs:NAME` inside `vector_store.docs_folder`.

    `docs:NAME` may name sub-folders but never leave the docs folder (no `..`, no absolute
    path, no symlink out of it).
    """
    text = text.strip().strip("\"'")
    if not text.startswith(DOCS_PREFIX):
        return Path(text).expanduser()
    name = text[len(DOCS_PREFIX):].strip()
    if docs_folder is None:
        raise UsageError("docs:NAME needs vector_store.docs_folder set in your config")
    if not name:
        raise UsageError("docs: needs a name: /vdoc docs:guide.md")
    root = Path(docs_folder).resolve()
    path = (root / name).resolve()
    if not path.is_relative_to(root):
        raise UsageError(f"docs:{name} is outside the docs folder {display_path(str(root))}")
    return path


@command("vdoc", "add a file or folder to memory (docs:NAME: from the docs folder)", group="memory",
         arguments=(Arg("path", "a file or folder", kind="path", metavar="PATH|docs:NAME"),),
         example="/vdoc notes.md")
def _vdoc(session: ChatSession, path: str) -> CommandResult:
    outcome = add_file_or_folder(
        require_store_and_model(session),
        document_path(path, session.settings.vector_store.docs_folder),
        session.settings.chunking,
        source="vdoc_command",
        # The full-screen chat shows a bar and can stop the add between two stored batches.
        chunks_stored=lambda name, done, total: session.progress(f"Adding {name}", done, total),
    )
    # Warnings (an empty file, one not in UTF-8) go with the result.
    return CommandResult(text="\n".join([outcome.sentence(short_path=True), *outcome.notes]))


@command("import", "import your old chats: a ChatGPT or Claude export, or llm's logs.db", group="memory",
         arguments=(Arg("path", "an export's .zip, folder or conversations.json, logs.db, or a folder of several",
                        kind="path", metavar="PATH"),),
         example="/import ~/Downloads/chatgpt-export.zip")
def _import(session: ChatSession, path: str) -> CommandResult:
    where = Path(path).expanduser()
    held = exports_in(where)
    if held.several:
        # A folder of several exports: each one, a line each (as --import-history).
        done = import_exports(require_store_and_model(session), held, progress=session.progress)
        lines = done.lines()
        lines += [f"Skipped {p.title or p.source_id or 'a conversation'}: {p.problem}"
                  for _, outcome in done.imported for p in outcome.problems]
        stored = sum(outcome.exchanges for _, outcome in done.imported)
        return CommandResult(text="\n".join(lines), error=(done.stopped or bool(done.failed)) and not stored)
    outcome = import_history(
        require_store_and_model(session),
        where,
        # The full-screen chat shows a bar, and Esc stops the import after whole conversations.
        progress=session.progress,
    )
    lines = [f"{outcome.sentence()}."]
    lines += [f"Skipped {p.title or p.source_id or 'a conversation'}: {p.problem}" for p in outcome.problems]
    return CommandResult(text="\n".join(lines), error=outcome.stopped and not outcome.exchanges)


def _exchange_rows(store: MemoryStore, exchanges: list[Exchange]) -> list[tuple[str, ...]]:
    return [(short_id(store, e.exchange_id), local_time(e.timestamp), e.user_prompt, e.assistant_response)
            for e in exchanges]


@command("vget", "show a memory and its versions, or this session's or thread's exchanges", group="memory",
         arguments=(Arg("target", "an id, 'session' or 'thread'", metavar="ID|session|thread"),),
         example="/vget session")
def _vget(session: ChatSession, target: str) -> CommandResult:
    store = require_store(session)
    columns = ("id", "date", "prompt", "answer")
    if target in ("session", "thread"):
        exchanges = (store.get_session(session.session_id) if target == "session"
                     else store.get_thread(session.thread_id))
        return CommandResult(text=f"{count_of(len(exchanges), 'exchange')} in this {target}", columns=columns,
                             rows=_exchange_rows(store, exchanges))
    record = get_record(store, target)
    title = f"Exchange {record.exchange_id}" if isinstance(record, Exchange) else f"Document chunk {record.id}"
    return CommandResult(text=title, columns=("field", "value"), rows=record_details(record),
                         markdown=record_markdown(record) + versions_markdown(store, record_id(record)))


@command(
    "vdelete",
    "delete a memory by id; asks first (--yes skips asking)", group="memory",
    arguments=(
        Arg("record", "one id (or the start of one)", metavar="ID"),
        Arg("yes", "delete without asking", kind="flag", optional=True),
    ),
    example="/vdelete 3f2a9c1e --yes",
)
def _vdelete(session: ChatSession, record: str, yes: bool) -> CommandResult:
    found = get_record(require_store(session), record)
    what, full_id = describe_record(found), record_id(found)
    if not yes:
        return CommandResult(request=Confirm(
            question=f"This deletes {what}.",
            then=lambda: _delete(session, full_id, what),
            # Quoted: an imported id may hold spaces or quotes.
            typed=f"/vdelete {shlex.quote(full_id)} --yes",
            declined="Nothing was deleted.",
        ))
    return _delete(session, full_id, what)


def _delete(session: ChatSession, full_id: str, what: str) -> CommandResult:
    delete_records(require_store(session), [full_id])
    if session.forget(full_id):
        # Deleting is forgetting: the model is not sent it again either, though the screen keeps it.
        return CommandResult(text=f"Deleted {what}. It was part of this conversation: it stays on screen, "
                                  "but is no longer sent to the model.")
    return CommandResult(text=f"Deleted {what}. The conversation on screen is unchanged.")
