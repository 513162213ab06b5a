"""The conversation commands: /continue, /threads, /clear, /history, /model, /showcontext, /theme."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ocat.commands import CommandResult, command, require_store
from ocat.errors import UsageError
from ocat.text import local_time

if TYPE_CHECKING:
    from ocat.session import ChatSession

CONTEXT_MODES = ("off", "on", "summary")


def first_line(text: str) -> str:
    """The first non-blank line of a prompt, for one-line listings."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


@command("threads", "list recent threads: id, last active, exchanges, first prompt", arguments="[N]")
def _threads(session: ChatSession, rest: str) -> CommandResult:
    store = require_store(session)
    limit = int(rest) if rest.isdigit() else 10
    summaries = store.lexical.recent_threads(limit)
    heads = {}
    if summaries:
        got = store.fetch("exchange", [head for *_, head in summaries if head], vectors=False)
        heads = {i: m.get("user_prompt", "") for i, m in zip(got["ids"], got["metadatas"])}
    rows = [
        (thread_id[:8], local_time(last), str(count), first_line(str(heads.get(head, "")))[:60])
        for thread_id, count, _first, last, head in summaries
    ]
    choices = [
        (thread_id, f"{local_time(last)}  {count:>3} exchange(s)  {first_line(str(heads.get(head, '')))[:60]}")
        for thread_id, count, _first, last, head in summaries
    ]
    text = f"{len(rows)} recent thread(s); /continue ID resumes one" if rows else "No threads yet."
    # /threads shows the table; /continue without an id also offers the threads as a pick.
    return CommandResult(text=text, columns=("thread", "last active", "exchanges", "first prompt"), rows=rows,
                         choices=choices)


@command("continue", "resume a thread by id or prefix; without one, pick from a list",
         arguments="[THREAD_ID]", aliases=("resume",))
def _continue(session: ChatSession, rest: str) -> CommandResult:
    if not rest:
        listing = _threads(session, "")
        if not listing.choices:
            return listing
        return dataclasses.replace(listing, text="Pick a thread to continue, or /continue ID", choose="/continue")
    store = require_store(session)
    found = store.lexical.resolve_prefix("exchange", rest.strip(), threads=True)
    if not found:
        raise UsageError(f"no thread with an id starting {rest.strip()!r}; /threads lists them")
    if len(found) > 1:
        raise UsageError(f"{rest.strip()!r} matches more than one thread; give more of the id")
    exchanges = session.resume(found[0])
    return CommandResult(
        text=f"Continuing thread {found[0][:8]}: {len(exchanges)} exchange(s), continuation {session.continuation_seq}.",
        redraw=True,
    )


@command("clear", "clear the screen and start a new thread (memory is kept)")
def _clear(session: ChatSession, rest: str) -> CommandResult:
    session.new_thread()
    return CommandResult(text="New thread.", redraw=True)


@command("history", "show this conversation's last prompts", arguments="[N]")
def _history(session: ChatSession, rest: str) -> CommandResult:
    count = int(rest) if rest.isdigit() else 10
    rows = [(local_time(e.timestamp), e.user_prompt) for e in session.history[-count:]]
    return CommandResult(text=f"{len(rows)} prompt(s)", columns=("when", "prompt"), rows=rows)


@command("model", "show or switch the model; the next turn uses it", arguments="[NAME]")
def _model(session: ChatSession, rest: str) -> CommandResult:
    if not rest:
        return CommandResult(text=f"Model: {session.settings.llm.model}")
    llm = dataclasses.replace(session.settings.llm, model=rest.strip())
    session.settings = dataclasses.replace(session.settings, llm=llm)
    return CommandResult(text=f"Model: {rest.strip()} from the next turn on.")


@command("showcontext", "show or set how used memories are shown: off, on or summary", arguments="[MODE]")
def _showcontext(session: ChatSession, rest: str) -> CommandResult:
    if not rest:
        return CommandResult(text=f"Context display: {session.settings.display.context_mode}")
    if rest not in CONTEXT_MODES:
        raise UsageError(f"/showcontext takes one of {', '.join(CONTEXT_MODES)}")
    display = dataclasses.replace(session.settings.display, context_mode=rest)
    session.settings = dataclasses.replace(session.settings, display=display)
    return CommandResult(text=f"Context display: {rest}")


@command("theme", "list the themes, or switch to one (full-screen chat)", arguments="[NAME]")
def _theme(session: ChatSession, rest: str) -> CommandResult:
    return CommandResult(theme=rest.strip())
