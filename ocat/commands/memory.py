"""The memory commands: /vquery, /vadd, /vdoc, /vget, /vdelete, /vstats."""

from __future__ import annotations

import shlex
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from ocat.commands import Arg, CommandResult, command, require_model, require_store
from ocat.errors import UsageError
from ocat.limits import MAX_RESULTS, MIN_RESULTS
from ocat.locations import display_path
from ocat.models import DocumentChunk, Exchange
from ocat.text import local_time

if TYPE_CHECKING:
    from ocat.session import ChatSession


@command(
    "vquery",
    "search memory: rank, score, where from, date, excerpt",
    arguments=(
        Arg("query", "a query", kind="text"),
        # The same rule and limits as `--results` (ocat.limits).
        Arg("count", "how many results", kind="int", optional=True, lo=MIN_RESULTS, hi=MAX_RESULTS,
            default_help="vector_store.context_results"),
    ),
    example='/vquery "what did we decide" 5',
)
def _vquery(session: ChatSession, query: str, count: int | None) -> CommandResult:
    from ocat.memory import RetrievalLimits, retrieve
    from ocat.memory.retrieval import reasons

    count = count or session.settings.vector_store.context_results
    limits = RetrievalLimits.from_settings(session.settings.vector_store, results=count)
    hits = retrieve(require_model(session), query, limits, limit=count)
    rows = []
    for rank, (hit, why) in enumerate(zip(hits, reasons(hits)), start=1):
        mark = "*" if hit.admitted else ""
        rows.append((str(rank), f"{hit.score:.2f}{mark}", why, hit.origin, hit.when(), hit.excerpt(60)))
    text = f"{len(hits)} result(s) for {query!r} (* = given to the model in a chat)" if hits else "No memories found."
    return CommandResult(text=text, columns=("#", "score", "why", "from", "date", "excerpt"), rows=rows)


@command("vadd", "store text as a memory", arguments=(Arg("text", "the text to remember", kind="rest"),),
         example="/vadd the spare key is under the blue flowerpot")
def _vadd(session: ChatSession, text: str) -> CommandResult:
    from ocat.chunking import options_from
    from ocat.memory import add_text

    options = options_from(session.settings.chunking)
    outcome = add_text(require_model(session), text, options, source="vadd_command", manual_entry=True)
    if outcome.added_chunks == 0:
        return CommandResult(text="Already remembered.")
    return CommandResult(text=f"Remembered ({outcome.added_chunks} chunk(s)).")


@command("vstats", "show the store's location and counts")
def _vstats(session: ChatSession) -> CommandResult:
    from ocat.memory import store_stats

    stats = asdict(store_stats(require_store(session), session.settings))
    stats["path"] = display_path(stats["path"])
    stats["model_path"] = display_path(stats["model_path"]) if stats["model_path"] else "not downloaded yet"
    return CommandResult(text="Memory", columns=("key", "value"), rows=[(k, str(v)) for k, v in stats.items()])


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


@command("vdoc", "add a file or folder to memory (docs:NAME: from the docs folder)",
         arguments=(Arg("path", "a file or folder", kind="path", metavar="PATH|docs:NAME"),),
         example="/vdoc notes.md")
def _vdoc(session: ChatSession, path: str) -> CommandResult:
    from ocat.chunking import options_from
    from ocat.memory import add_path

    target = document_path(path, session.settings.vector_store.docs_folder)
    options = options_from(session.settings.chunking)
    notes: list[str] = []  # warnings (an empty file, one not in UTF-8) go with the result
    outcome = add_path(
        require_model(session),
        target,
        options,
        source="vdoc_command",
        notify=notes.append,
        # The full-screen chat shows a bar and can stop the add between two stored batches.
        chunks_stored=lambda file, done, total: session.progress(f"Adding {file.name}", done, total),
    )
    text = f"Added {outcome.added_chunks} chunk(s) from {display_path(str(target))}"
    if outcome.total_chunks > outcome.added_chunks:
        text += f"; {outcome.total_chunks - outcome.added_chunks} already stored"
    if outcome.removed_chunks:
        text += f"; {outcome.removed_chunks} from files no longer in the folder removed"
    return CommandResult(text="\n".join([text + ".", *notes]))


def _exchange_rows(exchanges: list[Exchange]) -> list[tuple[str, ...]]:
    return [(e.exchange_id[:8], local_time(e.timestamp), e.user_prompt, e.assistant_response) for e in exchanges]


@command("vget", "show a memory by id, or this session's or thread's exchanges",
         arguments=(Arg("target", "an id, 'session' or 'thread'", metavar="ID|session|thread"),),
         example="/vget session")
def _vget(session: ChatSession, target: str) -> CommandResult:
    store = require_store(session)
    columns = ("id", "date", "prompt", "answer")
    if target in ("session", "thread"):
        exchanges = (store.get_session(session.session_id) if target == "session"
                     else store.get_thread(session.thread_id))
        return CommandResult(text=f"{len(exchanges)} exchange(s) in this {target}", columns=columns,
                             rows=_exchange_rows(exchanges))
    record = store.get(store.resolve_id(target))
    if isinstance(record, Exchange):
        fields = record.to_record()
        return CommandResult(text=f"Exchange {record.exchange_id}", columns=("field", "value"),
                             rows=[(k, str(v)) for k, v in fields.items()])
    assert isinstance(record, DocumentChunk)
    rows = [("text", record.text), *((k, str(v)) for k, v in sorted(record.metadata.items()))]
    return CommandResult(text=f"Document chunk {record.id}", columns=("field", "value"), rows=rows)


@command(
    "vdelete",
    "delete a memory by id; asks first (--yes skips asking)",
    arguments=(
        Arg("record", "one id (or the start of one)", metavar="ID"),
        Arg("yes", "delete without asking", kind="flag", optional=True),
    ),
    example="/vdelete 3f2a9c1e --yes",
)
def _vdelete(session: ChatSession, record: str, yes: bool) -> CommandResult:
    store = require_store(session)
    record_id = store.resolve_id(record)
    found = store.get(record_id)
    what = (
        f"the exchange {record_id[:8]} ({found.user_prompt[:60]!r})"
        if isinstance(found, Exchange)
        else f"the document chunk {record_id}"
    )
    if not yes:
        # Quoted: an imported id may hold spaces or quotes, and the confirmation is parsed again.
        return CommandResult(text=f"This deletes {what}.", confirm=f"/vdelete {shlex.quote(record_id)} --yes")
    store.delete([record_id])
    if session.forget(record_id):
        # Deleting is forgetting: the model is not sent it again either, though the screen keeps it.
        return CommandResult(text=f"Deleted {what}. It was part of this conversation: it stays on screen, "
                                  "but is no longer sent to the model.")
    return CommandResult(text=f"Deleted {what}. The conversation on screen is unchanged.")
