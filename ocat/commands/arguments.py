"""The arguments a slash command declares, and the parser that checks typed text against them.

Each command lists its arguments once (`Arg`); its usage line, its `/help` page and the
checks on what was typed all come from that list, so they cannot drift apart. A command's
handler is called only with values that passed the checks.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal, Protocol

from ocat.errors import UsageError
from ocat.text.limits import whole_number

# word:   one word; quotes group words into one ("two words"), as in a shell.
# text:   several words, joined with single spaces (a query); quotes as in a shell.
# rest:   the rest of the line exactly as typed, quotes and all (the text /vadd remembers).
# path:   the rest of the line as one file or folder path; enclosing quotes are dropped.
# int:    a whole number from `lo` to `hi`.
# choice: one of `choices` (any case).
# flag:   `--name` anywhere on the line; True when present.
Kind = Literal["word", "text", "rest", "path", "int", "choice", "flag"]
Value = str | int | bool | None

# After several words of text, a last word that looks like a number is meant as a count
# (`/vquery deploy notes 5`), and is checked as one: "0" is refused, not read as a word.
_NUMBER_LIKE = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True)
class Arg:
    """One declared argument: the handler's parameter `name`, what it is, and what it accepts."""

    name: str
    help: str  # a noun phrase: "a query", "how many threads to list"
    kind: Kind = "word"
    optional: bool = False
    default: Value = None  # what the handler gets when an optional argument is left out
    default_help: str = ""  # the default in words when it is not a fixed value (a setting)
    lo: int = 1
    hi: int = 0  # an int must declare its range (check_declaration refuses an empty one)
    choices: tuple[str, ...] = ()
    metavar: str = ""  # how usage shows it; NAME.upper() unless set

    @property
    def shown(self) -> str:
        """The argument's name as usage and errors show it: `COUNT`, `--yes`."""
        if self.kind == "flag":
            return f"--{self.name}"
        return self.metavar or self.name.upper()

    @property
    def synopsis(self) -> str:
        """Its part of the usage line: `"QUERY"`, `[COUNT]`, `[--yes]`."""
        shown = f'"{self.shown}"' if self.kind == "text" else self.shown
        return f"[{shown}]" if self.optional else shown

    def describe(self) -> str:
        """What it accepts, and its default, in words (for /help)."""
        takes = {
            "word": "one word",
            "text": "several words (quote them when the last one is a number)",
            "rest": "the rest of the line, as typed",
            "path": "a path, the rest of the line (quotes optional)",
            "int": f"a whole number from {self.lo} to {self.hi}",
            "choice": "one of " + ", ".join(self.choices),
            "flag": "present or not",
        }[self.kind]
        if not self.optional:
            return f"{self.help}: {takes}; required"
        default = self.default_help or ("" if self.default in (None, "", False) else str(self.default))
        return f"{self.help}: {takes}; optional" + (f", default {default}" if default else "")


class Declared(Protocol):
    """What the parser reads of a command: a registered `ocat.commands.registry.Command` is one
    (the registry imports this module, so the parser names only what it needs, never the registry)."""

    @property
    def name(self) -> str: ...

    @property
    def arguments(self) -> tuple[Arg, ...]: ...

    @property
    def usage(self) -> str: ...

    @property
    def example(self) -> str: ...


def check_declaration(name: str, arguments: tuple[Arg, ...]) -> None:
    """Refuse a declaration the parser could not read unambiguously (a programming error)."""
    names = [a.name for a in arguments]
    if len(set(names)) != len(names) or not all(n.isidentifier() for n in names):
        raise ValueError(f"/{name}: argument names must be distinct identifiers: {names}")
    whole = [a for a in arguments if a.kind in ("rest", "path")]
    if whole and len(arguments) > 1:
        raise ValueError(f"/{name}: a rest-of-line argument must be the only argument")
    positional = [a for a in arguments if a.kind != "flag"]
    for before, after in pairwise(positional):
        if before.optional and not after.optional:
            raise ValueError(f"/{name}: required {after.shown} follows optional {before.shown}")
    texts = [i for i, a in enumerate(positional) if a.kind == "text"]
    if len(texts) > 1 or (texts and not all(a.kind == "int" and a.optional for a in positional[texts[0] + 1:])):
        raise ValueError(f"/{name}: only optional numbers may follow a text argument")
    for arg in arguments:
        if arg.kind == "int" and not arg.lo <= arg.hi:
            raise ValueError(f"/{name}: {arg.shown} has an empty range")
        if arg.kind == "flag" and not arg.optional:
            raise ValueError(f"/{name}: a flag is optional by nature: {arg.shown}")
        if arg.kind == "choice" and not arg.choices:
            raise ValueError(f"/{name}: {arg.shown} has no choices")


def parse_arguments(command: Declared, text: str) -> dict[str, Value]:
    """The values of `command`'s arguments in `text` (what follows the name), keyed by name.

    Raises UsageError with one line that says what is wrong and shows the usage.
    """
    text = text.strip()
    if not command.arguments:
        if text:
            raise _bad(command, f'takes no arguments, not "{text}"')
        return {}
    first = command.arguments[0]
    if first.kind in ("rest", "path"):
        return {first.name: _whole_line(command, first, text)}
    flags, words = _take_flags(command, _split(command, text))
    return flags | _positional(command, [a for a in command.arguments if a.kind != "flag"], words)


def _bad(command: Declared, what: str) -> UsageError:
    return UsageError(f"/{command.name}: {what}; usage: {command.usage}")


def _missing(command: Declared, arg: Arg) -> Value:
    """An argument left out: its default, or the error that it is needed (with an example)."""
    if arg.optional:
        return arg.default
    raise UsageError(f"/{command.name} needs {arg.help}: {command.example}")


def _whole_line(command: Declared, arg: Arg, text: str) -> Value:
    # A path may hold spaces and quotes and backslashes: it is taken as typed, not split.
    if arg.kind == "path" and len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    return text if text else _missing(command, arg)


def _split(command: Declared, text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as exc:  # shlex's own words ("No closing quotation") say too little
        if "quotation" in str(exc):
            what = "a quote is not closed (put words with an apostrophe in double quotes: \"what's new\")"
        else:
            what = "the line ends in a backslash"
        raise _bad(command, what) from None


def _take_flags(command: Declared, words: list[str]) -> tuple[dict[str, Value], list[str]]:
    """The declared flags' values, and the words that are not flags."""
    flags = {a.shown: a for a in command.arguments if a.kind == "flag"}
    if not flags:
        return {}, words  # without flags, "--x" is an ordinary word (a query may hold one)
    values: dict[str, Value] = {a.name: False for a in flags.values()}
    rest = []
    for word in words:
        if not word.startswith("--"):
            rest.append(word)
        elif word.lower() in flags:
            values[flags[word.lower()].name] = True
        else:
            raise _bad(command, f'unknown option "{word}"')
    return values, rest


def _positional(command: Declared, arguments: list[Arg], words: list[str]) -> dict[str, Value]:
    """Words to arguments, in order; a text argument takes every word its followers leave."""
    values: dict[str, Value] = {}
    words = list(words)
    text_at = next((i for i, a in enumerate(arguments) if a.kind == "text"), len(arguments))
    for arg in arguments[:text_at]:
        values[arg.name] = _convert(command, arg, words.pop(0)) if words else _missing(command, arg)
    if text_at == len(arguments):
        if words:
            raise _bad(command, f'too many arguments ("{" ".join(words)}" is extra)')
        return values
    for arg in reversed(arguments[text_at + 1:]):
        # Only after some text: a lone number is the text itself (`/vquery 2019`).
        if len(words) > 1 and _NUMBER_LIKE.fullmatch(words[-1]):
            values[arg.name] = _convert(command, arg, words.pop())
        else:
            values[arg.name] = arg.default
    text_arg = arguments[text_at]
    joined = " ".join(words)
    values[text_arg.name] = joined if joined.strip() else _missing(command, text_arg)
    return values


def _convert(command: Declared, arg: Arg, word: str) -> Value:
    if not word.strip():
        return _missing(command, arg)  # `/continue ""` is `/continue`
    if arg.kind == "int":
        try:
            return whole_number(word, arg.lo, arg.hi)
        except ValueError as exc:
            raise _bad(command, f"{arg.shown} {exc}") from None
    if arg.kind == "choice":
        if word.lower() in arg.choices:
            return word.lower()
        raise _bad(command, f'{arg.shown} must be one of {", ".join(arg.choices)}, not "{word}"')
    return word
