"""The conversation commands: /continue, /threads, /clear, /history, /model, /showcontext, /theme."""

from __future__ import annotations

import dataclasses
import shlex
from typing import TYPE_CHECKING

from ocat.commands import Arg, CommandResult, command, require_store
from ocat.errors import UsageError
from ocat.limits import DEFAULT_LISTED, MAX_LISTED, MIN_LISTED
from ocat.text import local_time

if TYPE_CHECKING:
    from ocat.session import ChatSession

CONTEXT_MODES = ("off", "on", "summary")


def first_line(text: str) -> str:
    """The first non-blank line of a prompt, for one-line listings."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _count(what: str) -> Arg:
    """The optional COUNT of a listing: /threads and /history take the same one."""
    return Arg("count", f"how many {what} to list", kind="int", optional=True, lo=MIN_LISTED, hi=MAX_LISTED,
               default=DEFAULT_LISTED)


@command("threads", "list recent threads: id, last active, exchanges, first prompt",
         arguments=(_count("threads"),), example="/threads 20")
def _threads(session: ChatSession, count: int) -> CommandResult:
    store = require_store(session)
    summaries = store.lexical.recent_threads(count)
    heads = {}
    if summaries:
        got = store.fetch("exchange", [head for *_, head in summaries if head], vectors=False)
        heads = {i: m.get("user_prompt", "") for i, m in zip(got["ids"], got["metadatas"])}
    rows = [
        (thread_id[:8], local_time(last), str(count), first_line(str(heads.get(head, "")))[:60])
        for thread_id, count, _first, last, head in summaries
    ]
    # The pick runs `/continue VALUE`, which is parsed like typed text: quote odd (imported) ids.
    choices = [
        (shlex.quote(thread_id),
         f"{local_time(last)}  {count:>3} exchange(s)  {first_line(str(heads.get(head, '')))[:60]}")
        for thread_id, count, _first, last, head in summaries
    ]
    text = f"{len(rows)} recent thread(s); /continue ID resumes one" if rows else "No threads yet."
    # /threads shows the table; /continue without an id also offers the threads as a pick.
    return CommandResult(text=text, columns=("thread", "last active", "exchanges", "first prompt"), rows=rows,
                         choices=choices)


@command("continue", "resume a thread by id or prefix; without one, pick from a list", aliases=("resume",),
         arguments=(Arg("thread", "a thread's id or its start", optional=True, metavar="THREAD_ID"),),
         example="/continue 3f2a9c1e")
def _continue(session: ChatSession, thread: str | None) -> CommandResult:
    if not thread:
        listing = _threads(session, DEFAULT_LISTED)
        if not listing.choices:
            return listing
        return dataclasses.replace(listing, text="Pick a thread to continue, or /continue ID", choose="/continue")
    store = require_store(session)
    found = store.lexical.resolve_prefix("exchange", thread, threads=True)
    if not found:
        raise UsageError(f"no thread with an id starting {thread!r}; /threads lists them")
    if len(found) > 1:
        raise UsageError(f"{thread!r} matches more than one thread; give more of the id")
    exchanges = session.resume(found[0])
    return CommandResult(
        text=f"Continuing thread {found[0][:8]}: {len(exchanges)} exchange(s), continuation {session.continuation_seq}.",
        redraw=True,
    )


@command("clear", "clear the screen and start a new thread (memory is kept)")
def _clear(session: ChatSession) -> CommandResult:
    session.new_thread()
    return CommandResult(text="New thread.", redraw=True)


@command("history", "show this conversation's last prompts", arguments=(_count("prompts"),), example="/history 5")
def _history(session: ChatSession, count: int) -> CommandResult:
    rows = [(local_time(e.timestamp), e.user_prompt) for e in session.history[-count:]]
    return CommandResult(text=f"{len(rows)} prompt(s)", columns=("when", "prompt"), rows=rows)


@command("model", "show or switch the model; the next turn uses it",
         arguments=(Arg("name", "a model name litellm knows (as --model takes)", optional=True),),
         example="/model openai/gpt-4o-mini")
def _model(session: ChatSession, name: str | None) -> CommandResult:
    if not name:
        return CommandResult(text=f"Model: {session.settings.llm.model}")
    llm = dataclasses.replace(session.settings.llm, model=name)
    session.settings = dataclasses.replace(session.settings, llm=llm)
    return CommandResult(text=f"Model: {name} from the next turn on.")


@command("showcontext", "show or set how used memories are shown: off, on or summary",
         arguments=(Arg("mode", "how used memories are shown", kind="choice", optional=True, choices=CONTEXT_MODES),),
         example="/showcontext summary")
def _showcontext(session: ChatSession, mode: str | None) -> CommandResult:
    if not mode:
        return CommandResult(text=f"Context display: {session.settings.display.context_mode}")
    display = dataclasses.replace(session.settings.display, context_mode=mode)
    session.settings = dataclasses.replace(session.settings, display=display)
    return CommandResult(text=f"Context display: {mode}")


@command("theme", "list the themes, or switch to one (full-screen chat)",
         arguments=(Arg("name", "a theme's name", optional=True),), example="/theme ocat-night")
def _theme(session: ChatSession, name: str | None) -> CommandResult:
    return CommandResult(theme=name or "")
