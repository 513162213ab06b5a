"""What a slash command returns: data to show, and typed requests a front end carries out its own way.

A command never tells a front end how to draw: it returns text and rows, says whether the
conversation was replaced, and, when it needs the user, a request: `Confirm` (yes or no
before something is done) or `Choose` (a pick from a list), each carrying the step that
completes it, `ShowThemes` (themes belong to the full-screen chat), `Send` (a prompt to
send as the next turn), `EditPrompt` (the next prompt, to edit first), or `BrowseMemory`
(the full-screen memory browser).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence, Union


@dataclass(frozen=True)
class Confirm:
    """Ask before doing: `question` says what will happen; `then()` does it once the user says yes."""

    question: str
    then: Callable[[], CommandResult]
    # The command that does the same without asking, for a front end that cannot ask (a pipe).
    typed: str
    # What to say when the user says no.
    declined: str = "Nothing was changed."


@dataclass(frozen=True)
class Choose:
    """Offer a pick: `options` are (value, label); `then(value)` carries the pick out."""

    title: str
    options: list[tuple[str, str]]
    then: Callable[[str], CommandResult]
    # How to do the same by typing, for a front end that only lists the options.
    typed: str = ""


@dataclass(frozen=True)
class ShowThemes:
    """Switch to the theme `name`, or ("") list the themes: only the full-screen chat has themes."""

    name: str


@dataclass(frozen=True)
class Send:
    """Send `prompt` as the next turn of the chat, as if typed (/retry asks the question again)."""

    prompt: str


@dataclass(frozen=True)
class EditPrompt:
    """Edit the next prompt before it is sent. Without `replaces` (/edit): open the prompt being
    written in the user's editor ($VISUAL, $EDITOR). With it (/edit last): put `prompt`, the
    last exchange's, back to edit; sending it replaces that exchange (id `replaces`) through
    `ocat.commands.editing.replace_last`, sending a command or nothing leaves the exchange be."""

    prompt: str = ""
    replaces: str = ""


@dataclass(frozen=True)
class EditFile:
    """Open a file in the user's editor ($VISUAL, $EDITOR), creating it (and its folder) if new (/profile)."""

    path: Path


@dataclass(frozen=True)
class BrowseMemory:
    """Open the memory browser (the full-screen chat's), searching for `query` when given."""

    query: str = ""


Request = Union[Confirm, Choose, ShowThemes, Send, EditPrompt, EditFile, BrowseMemory]


@dataclass(frozen=True)
class CommandResult:
    """What a command did: a message, optional table rows, whether the chat should end, and
    whether the conversation was replaced (/continue, /clear); `request` when it needs the user."""

    text: str = ""
    columns: tuple[str, ...] = ()
    rows: Sequence[tuple[str, ...]] = ()
    # The column (an index) that takes the width the others leave, its cells cut with "…" to
    # fit (/vquery's excerpt): the rows hold the whole text, each face fits it to its width.
    fit_column: int | None = None
    # The fitted column's cells wrap onto more lines instead of being cut (/help's descriptions,
    # which are read whole).
    fit_wraps: bool = False
    # A memory's whole text as Markdown (/vget), after the rows: the full-screen chat renders
    # it, the line mode prints it as it is.
    markdown: str = ""
    error: bool = False
    quit: bool = False
    # The session's conversation was replaced: a front end showing it shows it afresh.
    conversation_replaced: bool = False
    request: Request | None = None
