"""The conversation commands: /continue, /threads, /clear, /history, /model, /showcontext, /theme."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ocat.commands.arguments import Arg
from ocat.commands.registry import command
from ocat.commands.results import CommandResult, ShowThemes
from ocat.config.loading import CONTEXT_MODES
from ocat.text.limits import DEFAULT_LISTED, MAX_LISTED, MIN_LISTED
from ocat.text.terminal import count_of, local_time
from ocat.choices import save_choice
from ocat.llm import model_list

if TYPE_CHECKING:
    from ocat.chat.session import ChatSession


def listed_count(what: str) -> Arg:
    """The optional COUNT of a listing: /threads and /history take the same one."""
    return Arg("count", f"how many {what} to list", kind="int", optional=True, lo=MIN_LISTED, hi=MAX_LISTED,
               default=DEFAULT_LISTED)


@command("clear", "clear the screen and start a new thread (memory is kept)", group="conversation")
def _clear(session: ChatSession) -> CommandResult:
    session.new_thread()
    return CommandResult(text="New thread.", conversation_replaced=True)


@command("history", "show this conversation's last prompts", arguments=(listed_count("prompts"),), example="/history 5",
         group="conversation")
def _history(session: ChatSession, count: int) -> CommandResult:
    rows = [(local_time(e.timestamp), e.user_prompt) for e in session.history[-count:]]
    return CommandResult(text=count_of(len(rows), "prompt"), columns=("when", "prompt"), rows=rows)


@command("model", "show or switch the model; the next turn uses it", group="settings",
         arguments=(Arg("name", "a model name litellm knows (as --model takes)", optional=True),),
         example="/model openai/gpt-4o-mini")
def _model(session: ChatSession, name: str | None) -> CommandResult:
    if name:
        _change_setting(session, "llm", "model", name)
        return CommandResult(text=f"Model: {name} from the next turn on.")
    current = session.settings.llm.model
    # Asked for: fetched again (a short timeout; commands run in a thread), and kept for completion.
    listed = model_list.remember_models(session.settings.llm,
                                        model_list.list_models(session.settings.llm, dummy=session.dummy))
    if listed.problem:
        return CommandResult(text=f"Model: {current}\nNo list of models: {listed.problem}")
    if not listed.names:
        return CommandResult(text=f"Model: {current}\n{listed.source} lists no models")
    text = (f"Model: {current}\n{count_of(len(listed.names), 'model')} from {listed.source}"
            " (/model NAME switches; Tab completes a name)")
    return CommandResult(text=text, columns=("model",),
                         rows=[(f"{n} (current)" if n == current else n,) for n in listed.names])


@command("showcontext", "show or set how used memories are shown: off, on or summary (kept for next time)",
         group="settings",
         arguments=(Arg("mode", "how used memories are shown", kind="choice", optional=True, choices=CONTEXT_MODES),),
         example="/showcontext summary")
def _showcontext(session: ChatSession, mode: str | None) -> CommandResult:
    if mode:
        _change_setting(session, "display", "context_mode", mode)
        save_choice("display.context_mode", mode)  # kept for the next runs (ocat.choices)
    return CommandResult(text=f"Context display: {session.settings.display.context_mode}")


def _change_setting(session: ChatSession, section: str, key: str, value: object) -> None:
    """Set `section.key` for the rest of this session (settings are frozen: replaced, not changed)."""
    changed = dataclasses.replace(getattr(session.settings, section), **{key: value})
    session.settings = dataclasses.replace(session.settings, **{section: changed})


@command("theme", "list the themes, or switch to one, kept for next time (full-screen chat)", group="settings",
         arguments=(Arg("name", "a theme's name", optional=True),), example="/theme ocat-night")
def _theme(session: ChatSession, name: str | None) -> CommandResult:
    return CommandResult(request=ShowThemes(name or ""))
