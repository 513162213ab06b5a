"""Who allowed a server's tool to run: the config beforehand (`allow`), the command (`--allow-tool
SERVER.TOOL`), an earlier "always" (kept in `~/.local/state/ocat/tool_consent.json`), or the
user asked at the moment of the call, by whichever face is in front of them.

A face that has a user sets `ask`; without one (`--ask`, `ocat mcp`, stdin not a terminal) a
call not allowed beforehand is denied, and the model reads that the user did not allow it.
Memory's own tools (search_memory, read_thread, remember) are ocat's and need no consent.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from ocat.config.locations import state_dir
from ocat.text.terminal import printable

if TYPE_CHECKING:
    from ocat.config.mcp_servers import Allow

DENIED = "the user did not allow this tool"
_STATE_FILE = "tool_consent.json"


class Answer(Enum):
    """The user's answer to "Allow this call?"."""

    ONCE = "y"
    ALWAYS = "a"
    NO = "n"

    @classmethod
    def from_letter(cls, text: str) -> Answer | None:
        """The answer a typed letter (or word) means, or None: y/yes, a/always, n/no."""
        word = text.strip().lower()
        for answer, words in ((cls.ONCE, ("y", "yes", "once")), (cls.ALWAYS, ("a", "always")), (cls.NO, ("n", "no"))):
            if word in words:
                return answer
        return None


@dataclass(frozen=True)
class ConsentRequest:
    """One call waiting for the user: which server, which tool, with what arguments."""

    server: str
    tool: str
    arguments: dict[str, Any]
    # Set when the turn that asked is cancelled (Ctrl+C): the face stops asking, the answer is no.
    abandoned: threading.Event = field(default_factory=threading.Event, compare=False, repr=False)

    @property
    def key(self) -> str:
        """`SERVER.TOOL`, as `--allow-tool` and `/tools deny` name it."""
        return f"{self.server}.{self.tool}"

    def arguments_text(self, indent: int | None = 2) -> str:
        """The arguments as JSON (pretty by default), safe to print: no control sequence gets through."""
        return printable(json.dumps(self.arguments, indent=indent, ensure_ascii=False, sort_keys=True))

    def argument_rows(self) -> list[tuple[str, str]]:
        """Each argument as (name, value as pretty JSON), by name, both safe to print: what the
        full-screen dialog shows row by row."""
        return [(printable(name), printable(json.dumps(self.arguments[name], indent=2, ensure_ascii=False,
                                                       sort_keys=True)))
                for name in sorted(self.arguments)]

    def question(self) -> str:
        """The line mode's question, on one line."""
        return f"Allow {printable(self.key)} {self.arguments_text(indent=None)}? [y]es once, [a]lways, [n]o: "


Ask = Callable[[ConsentRequest], "Answer | None"]


class Consent:
    """The rules one process decides calls by, and the face's way of asking (None: nobody to ask)."""

    def __init__(self, allow: dict[str, Allow], allowed_tools: Iterable[str] = (),
                 ask: Ask | None = None) -> None:
        self.allow = allow  # server -> its config's `allow`
        self.allowed_tools = frozenset(allowed_tools)
        self.ask = ask
        self._lock = threading.Lock()  # one question on screen at a time
        self._asking: ConsentRequest | None = None
        self._notes: list[str] = []  # what the user is told next (a damaged answers file moved aside)
        self._said: set[str] = set()  # a file that cannot be moved is said once, not at every read

    def reason(self, server: str, tool: str, read_only: bool) -> str | None:
        """Why this tool may run without asking ("config", "--allow-tool", "always"), or None."""
        allow = self.allow.get(server)
        # `allow: read-only` is a keyword and `allow: [names]` names tools: a tool *named*
        # "read-only" is only ever a name (ocat.config.mcp_servers.Allow).
        if allow is not None and allow.allows(tool, read_only):
            return "config"
        if f"{server}.{tool}" in self.allowed_tools:
            return "--allow-tool"
        if f"{server}.{tool}" in self._kept().keys:
            return "always"
        return None

    def _kept(self) -> Kept:
        kept = read_always()
        if kept.note is not None and kept.note not in self._said:
            self._said.add(kept.note)
            self._notes.append(kept.note)
        return kept

    def news(self) -> list[str]:
        """Lines for the user since last asked: a damaged `tool_consent.json` moved aside (reading
        the file now, so a turn says it before its first call)."""
        self._kept()
        notes, self._notes = self._notes, []
        return notes

    def take_back(self, key: str) -> bool:
        """Forget "always" for `SERVER.TOOL` (`/tools deny`); False when it was not allowed always."""
        if key not in self._kept().keys:
            return False
        return take_back(key)

    def decide(self, server: str, tool: str, arguments: dict[str, Any], read_only: bool) -> bool:
        """Whether this call may run: allowed beforehand, or the user says so now ("always" is kept)."""
        if self.reason(server, tool, read_only) is not None:
            return True
        if self.ask is None:
            return False
        with self._lock:
            self._asking = request = ConsentRequest(server, tool, arguments)
            try:
                answer = self.ask(request)
            finally:
                self._asking = None
        if request.abandoned.is_set():
            return False
        if answer is Answer.ALWAYS:
            self._kept()  # a damaged file is moved aside, and said, before anything is written
            keep_always(f"{server}.{tool}")
        return answer in (Answer.ONCE, Answer.ALWAYS)

    def abandon(self) -> None:
        """The turn was cancelled: a question on screen is withdrawn (and counts as no)."""
        asking = self._asking
        if asking is not None:
            asking.abandoned.set()


@dataclass(frozen=True)
class Kept:
    """The "always" answers kept in `tool_consent.json`; `damaged`: the file was there but not
    readable as answers, and `moved_aside` where it went (None: it could not be moved)."""

    keys: frozenset[str]
    damaged: bool = False
    moved_aside: Path | None = None

    @property
    def note(self) -> str | None:
        """The line the user is told when the file was damaged, else None."""
        if not self.damaged:
            return None
        if self.moved_aside is None:
            return (f"{state_dir() / _STATE_FILE} cannot be read: every tool asks first, and an "
                    "\"always\" answer is not kept until the file is mended or moved")
        return (f"{_STATE_FILE} could not be read, so it was moved aside to {self.moved_aside}: "
                "every tool asks first again (your earlier \"always\" answers are in that file)")


def read_always() -> Kept:
    """The `SERVER.TOOL`s the user answered "always" for. A file that is there but damaged (not
    JSON, not `{"always": [names]}`) is moved aside to `tool_consent.json.damaged-STAMP`, never
    read as empty and then overwritten: the user's answers stay in it, and the note says where."""
    path = state_dir() / _STATE_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Kept(frozenset())
    except (OSError, ValueError):  # unreadable, or not UTF-8: kept as it is, and nothing written over it
        return Kept(frozenset(), damaged=True, moved_aside=_move_aside(path))
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    listed = data.get("always") if isinstance(data, dict) else None
    if isinstance(listed, list) and all(isinstance(item, str) for item in listed):
        return Kept(frozenset(listed))
    return Kept(frozenset(), damaged=True, moved_aside=_move_aside(path))


def _move_aside(path: Path) -> Path | None:
    """Move the damaged file to a free `NAME.damaged-STAMP[-N]` beside it; None if it cannot be moved."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = path.with_name(f"{path.name}.damaged-{stamp}")
    number = 1
    while aside.exists():  # two damaged files in one second: neither overwrites the other
        number += 1
        aside = path.with_name(f"{path.name}.damaged-{stamp}-{number}")
    try:
        os.replace(path, aside)
    except OSError:  # a read-only folder, or another process moved it first
        return None
    return aside


def always_allowed() -> set[str]:
    """The `SERVER.TOOL`s the user answered "always" for (a damaged file is moved aside: read_always)."""
    return set(read_always().keys)


def keep_always(key: str) -> bool:
    """Remember "always" for `SERVER.TOOL`; False when a damaged file that could not be moved
    aside is in the way (it is never written over)."""
    kept = read_always()
    if kept.damaged and kept.moved_aside is None:
        return False
    _write(set(kept.keys) | {key})
    return True


def take_back(key: str) -> bool:
    """Forget "always" for `SERVER.TOOL` (`/tools deny`); False when it was not allowed always."""
    kept = read_always()
    if key not in kept.keys:
        return False
    _write(set(kept.keys) - {key})
    return True


def _write(keys: set[str]) -> None:
    path = state_dir() / _STATE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps({"always": sorted(keys)}, indent=2) + "\n", encoding="utf-8")
    os.replace(partial, path)
