"""YAML text read for the config: libyaml where it can, and nesting past any real config's
refused before a parser spends time on it.

PyYAML's pure-Python scanner keeps a "possible simple key" per open bracket and walks them all
at each token, so text nested n deep costs it ~n² steps: 1,000 brackets took 0.9 s of CPU before
it ran out of stack ("nested too deeply"), and a config file so nested took as long to be
refused. How deep it gets before that depends on how deep the caller's stack already is.
`too_deep_line` counts the brackets first, in one pass, so such text is refused at once, at
the same depth wherever it comes from.
"""

from __future__ import annotations

from typing import Any

import yaml

# libyaml's parser, when PyYAML has it: the pure-Python scanner took 80 us for an everyday
# value (libyaml 18) and 66 ms for a system prompt of 100 kB given as an option (libyaml 1.3).
# Both give the same values (the types are resolved in Python either way); the pure-Python one
# names a problem more plainly, so a value libyaml refuses is read again by it, for its message.
FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Brackets open at once beyond which YAML text is refused. A config nests a few levels; the
# pure-Python parser itself gives up at ~490 from a shallow stack, and a quarter of a second in.
MAX_NESTING = 100
# Characters after which a quote opens a quoted scalar (elsewhere it is part of a plain one: don't).
_QUOTE_AFTER = " \t\n[{,:-?"


class NestedTooDeeply(ValueError):
    """YAML text with more brackets open at once than MAX_NESTING."""

    def __init__(self, line: int) -> None:
        super().__init__(f"more than {MAX_NESTING} brackets open at line {line}")
        self.line = line


def too_deep_line(text: str, limit: int = MAX_NESTING) -> int | None:
    """The line (from 1) where `text` first has more than `limit` flow brackets (`[`, `{`) open,
    outside quoted scalars and comments; None when it never does. Cheap: a text without that
    many brackets is not walked."""
    if text.count("[") + text.count("{") <= limit:
        return None
    depth, line, quote, previous = 0, 1, "", "\n"
    index, end = 0, len(text)
    while index < end:
        char = text[index]
        if char == "\n":
            line += 1
        if quote:
            if char == quote:
                if quote == "'" and text.startswith("''", index):
                    index += 1  # '' is a quote inside a single-quoted scalar
                else:
                    quote = ""
            elif char == "\\" and quote == '"':
                index += 1  # an escaped character, \" among them
        elif char in "'\"" and previous in _QUOTE_AFTER:
            quote = char
        elif char == "#" and previous in " \t\n":
            newline = text.find("\n", index)
            index = end if newline < 0 else newline
            continue
        elif char in "[{":
            depth += 1
            if depth > limit:
                return line
        elif char in "]}" and depth:
            depth -= 1
        previous = char
        index += 1
    return None


def read_scalar(text: str) -> Any:
    """`text` (an `OCAT_*` variable's or a `--set` flag's value) read as YAML: by libyaml, and by
    the pure-Python parser when libyaml fails, for its plainer message. Raises NestedTooDeeply
    for text nested past MAX_NESTING, and what the parser raises."""
    line = too_deep_line(text)
    if line is not None:
        raise NestedTooDeeply(line)
    try:
        return yaml.load(text, Loader=FAST_LOADER)  # a safe loader: libyaml with the SafeLoader's types
    except Exception:  # the same failure again below, with the pure-Python parser's message
        return yaml.safe_load(text)


def yaml_failure(exc: BaseException) -> str:
    """Why YAML could not be read, for failures that are not YAMLError (whose text is its own)."""
    if isinstance(exc, (RecursionError, NestedTooDeeply)):
        return " (nested too deeply)"
    if isinstance(exc, yaml.YAMLError):
        return ""
    return f" ({type(exc).__name__}: {exc})"
