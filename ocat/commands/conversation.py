"""The conversation commands: /continue, /threads, /clear, /history, /model, /showcontext, /theme."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ocat.commands import Arg, Choose, CommandResult, ShowThemes, command, require_store
from ocat.config import CONTEXT_MODES
from ocat.limits import DEFAULT_LISTED, MAX_LISTED, MIN_LISTED
from ocat.text import local_time

if TYPE_CHECKING:
    from ocat.session import ChatSession


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
    from ocat.operations.records import recent_threads

    threads = recent_threads(require_store(session), count)
    rows = [(t.thread_id[:8], local_time(t.last_active), str(t.exchanges), first_line(t.first_prompt)[:60])
            for t in threads]
    text = f"{len(rows)} recent thread(s); /continue ID resumes one" if rows else "No threads yet."
    return CommandResult(text=text, columns=("thread", "last active", "exchanges", "first prompt"), rows=rows)


@command("continue", "resume a thread by id or prefix; without one, pick from a list", aliases=("resume",),
         arguments=(Arg("thread", "a thread's id or its start", optional=True, metavar="THREAD_ID"),),
         example="/continue 3f2a9c1e")
def _continue(session: ChatSession, thread: str | None) -> CommandResult:
    from ocat.operations.records import recent_threads, resolve_thread

    if thread:
        return _resume(session, resolve_thread(require_store(session), thread))
    threads = recent_threads(require_store(session), DEFAULT_LISTED)
    if not threads:
        return CommandResult(text="No threads yet.")
    options = [
        (t.thread_id, f"{local_time(t.last_active)}  {t.exchanges:>3} exchange(s)  {first_line(t.first_prompt)[:60]}")
        for t in threads
    ]
    return CommandResult(request=Choose(
        title="Pick a thread to continue, or /continue ID",
        options=options,
        then=lambda thread_id: _resume(session, thread_id),
        typed="/continue ID",
    ))


def _resume(session: ChatSession, thread_id: str) -> CommandResult:
    exchanges = session.resume(thread_id)
    return CommandResult(
        text=f"Continuing thread {thread_id[:8]}: {len(exchanges)} exchange(s), "
        f"continuation {session.continuation_seq}.",
        conversation_replaced=True,
    )


@command("clear", "clear the screen and start a new thread (memory is kept)")
def _clear(session: ChatSession) -> CommandResult:
    session.new_thread()
    return CommandResult(text="New thread.", conversation_replaced=True)


@command("history", "show this conversation's last prompts", arguments=(_count("prompts"),), example="/history 5")
def _history(session: ChatSession, count: int) -> CommandResult:
    rows = [(local_time(e.timestamp), e.user_prompt) for e in session.history[-count:]]
    return CommandResult(text=f"{len(rows)} prompt(s)", columns=("when", "prompt"), rows=rows)


@command("model", "show or switch the model; the next turn uses it",
         arguments=(Arg("name", "a model name litellm knows (as --model takes)", optional=True),),
         example="/model openai/gpt-4o-mini")
def _model(session: ChatSession, name: str | None) -> CommandResult:
    if name:
        _change_setting(session, "llm", "model", name)
        return CommandResult(text=f"Model: {name} from the next turn on.")
    return CommandResult(text=f"Model: {session.settings.llm.model}")


@command("showcontext", "show or set how used memories are shown: off, on or summary",
         arguments=(Arg("mode", "how used memories are shown", kind="choice", optional=True, choices=CONTEXT_MODES),),
         example="/showcontext summary")
def _showcontext(session: ChatSession, mode: str | None) -> CommandResult:
    if mode:
        _change_setting(session, "display", "context_mode", mode)
    return CommandResult(text=f"Context display: {session.settings.display.context_mode}")


def _change_setting(session: ChatSession, section: str, key: str, value: object) -> None:
    """Set `section.key` for the rest of this session (settings are frozen: replaced, not changed)."""
    changed = dataclasses.replace(getattr(session.settings, section), **{key: value})
    session.settings = dataclasses.replace(session.settings, **{section: changed})


@command("theme", "list the themes, or switch to one (full-screen chat)",
         arguments=(Arg("name", "a theme's name", optional=True),), example="/theme ocat-night")
def _theme(session: ChatSession, name: str | None) -> CommandResult:
    return CommandResult(request=ShowThemes(name or ""))
