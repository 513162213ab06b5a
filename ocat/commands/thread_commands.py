"""The thread commands: /threads, /continue, /fork, /rename, /deletethread, /export, /retry."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ocat.commands.arguments import Arg
from ocat.commands.registry import command, require_store
from ocat.commands.results import Choose, CommandResult, Confirm, Send
from ocat.commands.conversation import listed_count
from ocat.text.limits import DEFAULT_LISTED
from ocat.config.locations import display_path
from ocat.text.terminal import count_of, local_time
from ocat import memory
from ocat.operations.lookup import recent_threads, resolve_thread
from ocat.operations.forks import fork_title
from ocat.operations.threads import default_title, delete_thread, export_conversation, rename_thread, thread_title

if TYPE_CHECKING:
    from ocat.chat.session import ChatSession


@command("threads", "list recent threads: id, last active, exchanges, title", group="conversation",
         arguments=(listed_count("threads"),), example="/threads 20")
def _threads(session: ChatSession, count: int) -> CommandResult:
    threads = recent_threads(require_store(session), count)
    rows = [(t.thread_id[:8], local_time(t.last_active), str(t.exchanges), t.title) for t in threads]
    text = f"{count_of(len(rows), 'recent thread')}; /continue ID resumes one" if rows else "No threads yet."
    return CommandResult(text=text, columns=("thread", "last active", "exchanges", "title"), rows=rows)


@command("continue", "resume a thread by id or prefix; without one, pick from a list", aliases=("resume",),
         group="conversation",
         arguments=(Arg("thread", "a thread's id or its start", optional=True, metavar="THREAD_ID"),),
         example="/continue 3f2a9c1e")
def _continue(session: ChatSession, thread: str | None) -> CommandResult:
    if thread:
        return _resume(session, resolve_thread(require_store(session), thread))
    threads = recent_threads(require_store(session), DEFAULT_LISTED)
    if not threads:
        return CommandResult(text="No threads yet.")
    options = [(t.thread_id, f"{local_time(t.last_active)}  {count_of(t.exchanges, 'exchange'):>13}  {t.title}")
               for t in threads]
    return CommandResult(request=Choose(
        title="Pick a thread to continue, or /continue ID",
        options=options,
        then=lambda thread_id: _resume(session, thread_id),
        typed="/continue ID",
    ))


def _resume(session: ChatSession, thread_id: str) -> CommandResult:
    exchanges = session.resume(thread_id)
    text = f"Resumed thread {thread_id[:8]}: {count_of(len(exchanges), 'exchange')}"
    inherited = len(session.history) - len(exchanges)
    if inherited:
        text += f" after the {count_of(inherited, 'exchange')} it was forked with"
    # The first resume is continuation 1; a later one says how often the thread was resumed before.
    before = session.continuation_seq - 1
    text += f" (resumed {count_of(before, 'time')} before)." if before > 0 else "."
    return CommandResult(text=text, conversation_replaced=True)


@command("fork", "start a new thread from an exchange of this one: N counts back from the last (1, the "
         "default); the new thread has the history up to there, and both keep all their exchanges",
         group="conversation", example="/fork 3",
         arguments=(Arg("back", "which exchange, counted back from the last (1)", kind="int", optional=True,
                        lo=1, hi=1_000_000, default=1, metavar="N"),))
def _fork(session: ChatSession, back: int = 1) -> CommandResult:
    return _forked(session, back)


def fork_at(session: ChatSession, exchange_id: str) -> CommandResult:
    """/fork at an exchange picked on screen (the full-screen chat's key on a focused message)."""
    ids = [e.exchange_id for e in session.history]
    if exchange_id not in ids:
        return CommandResult(text="That message is not an exchange of this conversation (its answer was not "
                                  "finished, or it was taken back): nothing to fork.", error=True)
    return _forked(session, len(ids) - ids.index(exchange_id))


def _forked(session: ChatSession, back: int) -> CommandResult:
    store = session.session_memory.store
    was, count = session.thread_id, len(session.history)
    title = thread_title(store, was, session.history) if store is not None and session.history else ""
    point = session.fork(back)
    kept = len(session.history)
    text = (f"Forked at exchange {kept} of {count} ({default_title(point.user_prompt)!r}): a new thread with the "
            f"{count_of(kept, 'exchange')} up to there")
    if store is not None and not session.dummy:
        given = rename_thread(store, session.thread_id, fork_title(title))
        text += f", called {given!r}; {title!r} keeps all {count}."
    else:
        why = "dummy mode stores nothing" if session.dummy else "memory is off: /rename names it once it is back"
        text += f"; the thread it came from keeps all {count} (the fork has no title: {why})."
    return CommandResult(text=text + " What you say next goes on from there.", conversation_replaced=True)


@command("rename", "give this thread a title (/threads and the picker show it); empty: its first prompt again",
         group="conversation",
         arguments=(Arg("title", "the new title", kind="rest", optional=True),),
         example="/rename kitchen renovation")
def _rename(session: ChatSession, title: str | None) -> CommandResult:
    given = rename_thread(require_store(session), session.thread_id, title or "")
    if given:
        return CommandResult(text=f"This thread is now called {given!r}.")
    first = session.history[0].user_prompt if session.history else ""
    return CommandResult(text=f"This thread is called by its first prompt again: {default_title(first)!r}.")


@command("deletethread", "delete a whole thread from memory (this one without an id); asks first", group="conversation",
         aliases=("rmthread",),
         arguments=(Arg("thread", "a thread's id or its start", optional=True, metavar="THREAD_ID"),),
         example="/deletethread 3f2a9c1e")
def _deletethread(session: ChatSession, thread: str | None) -> CommandResult:
    store = require_store(session)
    thread_id = resolve_thread(store, thread) if thread else session.thread_id
    exchanges = store.get_thread(thread_id)
    if not exchanges:
        return CommandResult(text="This thread has nothing in memory yet." if not thread else
                             f"No thread {thread_id!r} in memory.", error=bool(thread))
    title = thread_title(store, thread_id, exchanges)
    return CommandResult(request=Confirm(
        question=f"This deletes the thread {title!r} ({count_of(len(exchanges), 'exchange')}) from memory.",
        then=lambda: _delete_thread(session, thread_id),
        typed=f"/deletethread {thread_id}",
        declined="Nothing was deleted.",
    ))


def _delete_thread(session: ChatSession, thread_id: str) -> CommandResult:
    deleted = delete_thread(require_store(session), thread_id)
    text = f"Deleted the thread {deleted.title!r} ({count_of(deleted.exchanges, 'exchange')})."
    if thread_id != session.thread_id:
        return CommandResult(text=text)
    # The conversation on screen was that thread: it is gone from memory, so start afresh.
    session.new_thread()
    return CommandResult(text=text + " A new thread starts.", conversation_replaced=True)


@command("export", "write this conversation as Markdown (to PATH, or a file named after it here)", group="conversation",
         arguments=(Arg("path", "a file, or a folder to put it in", kind="path", optional=True),),
         example="/export ~/notes/garden.md")
def _export(session: ChatSession, path: str | None) -> CommandResult:
    if not session.history:
        return CommandResult(text="Nothing to export yet: this conversation is empty.", error=True)
    title = default_title(session.history[0].user_prompt)
    if session.session_memory.store is not None:
        title = thread_title(session.session_memory.store, session.thread_id, session.history)
    target = export_conversation(title, session.history, path)
    return CommandResult(text=f"Wrote {count_of(len(session.history), 'exchange')} to {display_path(str(target))}.")


@command("retry", "ask the last prompt again: its answer is replaced, in memory too", aliases=("regenerate",),
         group="conversation")
def _retry(session: ChatSession) -> CommandResult:
    last = session.take_back_last()
    if last is None:
        return CommandResult(text="Nothing to retry yet: this conversation is empty.", error=True)
    return CommandResult(text="Asking again; the earlier answer is forgotten.", conversation_replaced=True,
                         request=Send(last.user_prompt))


@command("project", "show or set which project's memories this chat searches: a folder (only its "
         "exchanges), 'all' (every project alike) or 'auto' (this chat's first, the default)", group="memory",
         example="/project ~/src/ferry",
         arguments=(Arg("where", "a project's folder, '.', 'all' or 'auto'", kind="path", optional=True, default="",
                        metavar="PATH|all|auto"),))
def _project(session: ChatSession, where: str = "") -> CommandResult:
    if where == "all":
        session.project_policy, session.project_path = "off", None
    elif where == "auto":
        session.project_policy, session.project_path = "prefer", None
    elif where:
        folder = Path(where).expanduser()
        if not folder.is_dir():  # a typo would keep every search to an empty project
            what = "is a file, not a folder" if folder.exists() else "does not exist"
            return CommandResult(text=f"{display_path(str(folder))} {what}: /project takes a project's folder "
                                      "(or '.', 'all', 'auto'); the project is unchanged.", error=True)
        session.project_policy, session.project_path = "only", memory.project_of(folder)
    if where:
        session.wake.forget()  # the next thread's wake block lists the threads in the new order
    scope = memory.describe_scope(session.scope())
    return CommandResult(text=f"This chat's project is {display_path(session.project)}; its searches use "
                              f"{scope}. /project PATH keeps to one project's exchanges, "
                              "/project all treats every project alike, /project auto prefers this one (the default).")
