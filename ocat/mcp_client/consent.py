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
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Iterable

from ocat.config.locations import state_dir
from ocat.text.terminal import printable

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

    def question(self) -> str:
        """The line mode's question, on one line."""
        return f"Allow {printable(self.key)} {self.arguments_text(indent=None)}? [y]es once, [a]lways, [n]o: "


Ask = Callable[[ConsentRequest], "Answer | None"]


class Consent:
    """The rules one process decides calls by, and the face's way of asking (None: nobody to ask)."""

    def __init__(self, allow: dict[str, tuple[str, ...]], allowed_tools: Iterable[str] = (),
                 ask: Ask | None = None) -> None:
        self.allow = allow  # server -> its config's `allow`
        self.allowed_tools = frozenset(allowed_tools)
        self.ask = ask
        self._lock = threading.Lock()  # one question on screen at a time
        self._asking: ConsentRequest | None = None

    def reason(self, server: str, tool: str, read_only: bool) -> str | None:
        """Why this tool may run without asking ("config", "--allow-tool", "always"), or None."""
        listed = self.allow.get(server, ())
        if tool in listed or (read_only and "read-only" in listed):
            return "config"
        if f"{server}.{tool}" in self.allowed_tools:
            return "--allow-tool"
        if f"{server}.{tool}" in always_allowed():
            return "always"
        return None

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
            keep_always(f"{server}.{tool}")
        return answer in (Answer.ONCE, Answer.ALWAYS)


    def abandon(self) -> None:
        """The turn was cancelled: a question on screen is withdrawn (and counts as no)."""
        asking = self._asking
        if asking is not None:
            asking.abandoned.set()


def always_allowed() -> set[str]:
    """The `SERVER.TOOL`s the user answered "always" for (an unreadable file counts as none)."""
    try:
        data = json.loads((state_dir() / _STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    listed = data.get("always") if isinstance(data, dict) else None
    return {item for item in listed if isinstance(item, str)} if isinstance(listed, list) else set()


def keep_always(key: str) -> None:
    """Remember "always" for `SERVER.TOOL`."""
    _write(always_allowed() | {key})


def take_back(key: str) -> bool:
    """Forget "always" for `SERVER.TOOL` (`/tools deny`); False when it was not allowed always."""
    kept = always_allowed()
    if key not in kept:
        return False
    _write(kept - {key})
    return True


def _write(keys: set[str]) -> None:
    path = state_dir() / _STATE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps({"always": sorted(keys)}, indent=2) + "\n", encoding="utf-8")
    os.replace(partial, path)
