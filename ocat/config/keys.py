"""The config's keys: each one's type and checks, lookup by name, and validation of one value.

Every layer of the config (the shipped file, the user's file, `OCAT_*` variables and
command-line flags) checks its values here, so a bad value reads the same wherever it was
set: the key, where it was set, what it must be and what it was.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from ocat.errors import ConfigError
from ocat.text.redact import url_without_credentials
from ocat.config.settings import HEADER_NAME, SECTION_CLASSES, SECTIONS
from ocat.config.yaml_read import read_scalar, yaml_failure

ENV_PREFIX = "OCAT_"
# Keys that moved, old dotted name -> new: the wake block's keys left `memory` for a section of
# their own (issue 50). The old names are read for one release; each use is said in one line
# (`Settings.deprecations`), and one key given under both names in one place is refused, as a
# key written twice in a file is.
MOVED_KEYS: dict[str, str] = {
    "memory.wake": "wake.enabled",
    "memory.wake_tokens": "wake.tokens",
    "memory.wake_threads": "wake.threads",
    "memory.profile": "wake.profile",
}


@dataclass(frozen=True)
class Spec:
    """One key of the config: its dotted name, its type and the checks its value must pass."""

    dotted: str  # section.key
    kind: str  # bool, int, float, str, list or dict (names to strings)
    nullable: bool
    meta: Mapping[str, Any]  # the field's metadata: doc, path, and the checks (see ocat.config.settings)


def _spec_for(section: str, cls: type) -> dict[str, Spec]:
    hints = typing.get_type_hints(cls)
    specs = {}
    for f in fields(cls):
        hint = hints[f.name]
        args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        base = next(a for a in args if a is not type(None))
        origin = typing.get_origin(base)
        # A Literal of words (display.context_mode) is a string whose choices the field names.
        kind = ("list" if origin is list else "dict" if origin is dict else "str" if origin is typing.Literal
                else base.__name__)
        specs[f.name] = Spec(f"{section}.{f.name}", kind, type(None) in args, f.metadata)
    return specs


# Section name -> key name -> spec, for every key of the config.
SPECS: dict[str, dict[str, Spec]] = {s: _spec_for(s, c) for s, c in SECTION_CLASSES.items()}


@dataclass(frozen=True)
class Source:
    """Where a value came from: for messages, for resolving relative paths, and for blame."""

    label: str  # "FILE:LINE", an env var name, or "command line"
    base_dir: Path
    rank: int  # layer precedence; 0 is the shipped defaults
    deprecation: str | None = None  # the line to say when the key was written under its old name


# A layer maps a dotted key to its (validated value, source).
Layer = dict[str, tuple[Any, Source]]


def config_error(where: str, message: str) -> ConfigError:
    """The ConfigError for a problem at `where` (a FILE:LINE, a variable, or the command line)."""
    return ConfigError(f"config error: {where}: {message}")


def _quoted(name: str) -> str:
    return f"'{name}'"


def unknown_name(what: str, name: str, known: list[str], show: Callable[[str], str] = _quoted) -> str:
    """`unknown key 'x' (did you mean 'y'?)`: the closest known name, formatted by `show`, as a hint."""
    match = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {show(match[0])}?)" if match else ""
    return f"unknown {what} '{name}'{hint}"


def env_name(dotted: str) -> str:
    """The environment variable that sets a key: llm.model -> OCAT_LLM_MODEL."""
    return ENV_PREFIX + dotted.replace(".", "_").upper()


def lookup(dotted: str, where: str, show: Callable[[str], str] = _quoted) -> Spec:
    """The spec of a dotted key given in `where` (an old name, MOVED_KEYS, gives its new key's);
    `show` formats a suggestion."""
    dotted = MOVED_KEYS.get(dotted, dotted)
    section, dot, key = dotted.partition(".")
    if not dot:
        raise config_error(where, f"unknown key '{dotted}' (keys look like section.key, e.g. llm.model)")
    if section not in SPECS:
        raise config_error(where, unknown_name("section", section, list(SECTIONS)))
    if key not in SPECS[section]:
        known = [f"{section}.{k}" for k in SPECS[section]]
        raise config_error(where, unknown_name("key", dotted, known, show))
    return SPECS[section][key]


def put(layer: Layer, written: str, spec: Spec, value: Any, source: Source,
        show: Callable[[str], str] = _quoted) -> None:
    """Check `value` (`validate`) and set `spec`'s key to it in `layer`; `written` is how the key
    was written: its dotted name, or its old one (then the source carries the line that says so).

    The same key under both its names in one layer is a ConfigError naming both: which one was
    meant is not for ocat to guess. (Under one name twice, the last wins: a YAML merge key's
    value overridden, as YAML means it.)
    """
    new = spec.dotted
    if new in layer and (layer[new][1].deprecation is None) != (written == new):
        old = next(name for name, moved in MOVED_KEYS.items() if moved == new)
        before = layer[new][1].label
        # A file's other line is worth naming; a variable's label is its name, already said.
        at = f" ({before})" if before not in (source.label, show(old), show(new)) else ""
        raise config_error(source.label, f"{show(new)} is given twice: as {show(new)} and as its old name "
                                         f"{show(old)}{at}; keep {show(new)} only")
    if written != new:
        where = "" if source.label == show(written) else f"{source.label}: "
        source = replace(source, deprecation=f"config: {where}{show(written)} is deprecated, it is now {show(new)} "
                                             "(the old name is read for this release only)")
    layer[new] = (validate(spec, value, source, written), source)


# ---- validation ------------------------------------------------------------

_KIND_NAMES = {"bool": "true or false", "int": "an integer", "float": "a number",
               "str": "a string", "list": "a list of strings", "dict": "a mapping of names to strings"}


class _Invalid(Exception):
    """A bad value; the message starts after the key name."""


_TYPE_NAMES = {bool: "boolean", str: "string", int: "integer", float: "number"}


def _describe(value: Any) -> str:
    """A value as a message shows it, with its YAML type: `'abc' (string)`, `true (boolean)`."""
    if isinstance(value, list):
        bad = next((v for v in value if not isinstance(v, str)), None)
        return "a list" if bad is None else f"a list containing {_describe(bad)}"
    if type(value) in _TYPE_NAMES:
        shown = str(value).lower() if isinstance(value, bool) else repr(value)
        return f"{shown} ({_TYPE_NAMES[type(value)]})"
    return "null" if value is None else "a mapping" if isinstance(value, dict) else type(value).__name__


# A number as people write it on a command line: YAML 1.1 takes `1e-3` and `1e309` for strings.
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(inf|infinity|nan)", re.IGNORECASE)


def _check_type(spec: Spec, value: Any) -> Any:
    if value is None and spec.nullable:
        return None
    written = value
    # YAML 1.1 reads a bare `off` as false and `on` as true: for a setting whose choices are
    # those words (`context_mode: off`, `consolidate: off`), that is what the user wrote.
    if spec.kind == "str" and isinstance(value, bool) and ("on" if value else "off") in spec.meta.get("choices", ()):
        value = "on" if value else "off"
    if spec.kind == "float" and isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
        value = float(value)
    if spec.kind == "float" and isinstance(value, float) and not math.isfinite(value):
        # 1e309 is past the largest float: it reads as infinity, which no setting can mean.
        raise _Invalid(f"must be a finite number, got {str(written).strip()} (out of range)")
    ok = {
        "bool": isinstance(value, bool),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "str": isinstance(value, str),
        "list": isinstance(value, list) and all(isinstance(v, str) for v in value),
        "dict": isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()),
    }[spec.kind]
    if not ok and spec.kind == "dict" and isinstance(value, dict):
        name = next(k for k, v in value.items() if not (isinstance(k, str) and isinstance(v, str)))
        raise _Invalid(f"{name} must be a string (quote it)")  # the value itself may be a secret: not shown
    if not ok:
        expected = _KIND_NAMES[spec.kind] + (" or null" if spec.nullable else "")
        raise _Invalid(f"must be {expected}, got {_describe(value)}")
    return float(value) if spec.kind == "float" else value


def _check_value(spec: Spec, value: Any) -> None:
    m = spec.meta
    if isinstance(value, dict):
        _check_headers(value)
        return
    if "choices" in m and value not in m["choices"]:
        raise _Invalid(f"must be one of {', '.join(m['choices'])}, got {value!r}")
    if "pattern" in m and not m["pattern"][0].fullmatch(value):
        # A URL's user:password@ is masked: the message is shown and logged.
        raise _Invalid(f"must be {m['pattern'][1]}, got {url_without_credentials(value)!r}")
    lo, hi = m.get("lo"), m.get("hi")
    # Written as `not ...` so that NaN fails every range.
    if lo is not None and hi is not None and not lo <= value <= hi:
        raise _Invalid(f"must be between {lo} and {hi}, got {value}")
    if lo is not None and hi is None and not value >= lo:
        raise _Invalid(f"must be at least {lo}, got {value}")
    if "above" in m and not value > m["above"]:
        raise _Invalid(f"must be greater than {m['above']}, got {value}")


def _check_headers(value: dict[str, str]) -> None:
    """HTTP header names and values (the one mapping setting): a bad one is named, its value never shown."""
    for name, text in value.items():
        if not HEADER_NAME.fullmatch(name):
            raise _Invalid(f"has {name!r}, which is not an HTTP header name")
        if any(ch in text for ch in "\r\n\0"):
            raise _Invalid(f"{name} holds a line break or NUL, which no header value may")


def _resolve(text: str, base_dir: Path) -> str:
    if not text.strip():
        raise _Invalid("must not be empty (use null for the default)")
    path = Path(text).expanduser()
    return os.path.abspath(path if path.is_absolute() else base_dir / path)


def validate(spec: Spec, value: Any, source: Source, written: str | None = None) -> Any:
    """The value checked and normalised (floats, resolved paths), or a ConfigError naming the key
    as `written` (an old name, MOVED_KEYS) or by its name."""
    try:
        value = _check_type(spec, value)
        if value is None:
            return None
        _check_value(spec, value)
        if spec.meta["path"]:
            if isinstance(value, list):
                return [_resolve(v, source.base_dir) for v in value]
            return _resolve(value, source.base_dir)
        return value
    except _Invalid as exc:
        raise config_error(source.label, f"{written or spec.dotted} {exc}") from None


def _quote(text: str, limit: int = 60) -> str:
    """`text` quoted for a one-line message, cut short when long (a value can be any size)."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"... ({len(text)} characters)"


def parse_text(spec: Spec, text: str, where: str) -> Any:
    """An env or command-line string parsed as a YAML scalar.

    A string field keeps the text as written when YAML would turn it into something
    else, or cannot read it at all, so `off`, `1.5`, `Note: be brief` or `[[[...` stay
    strings rather than failing.
    """
    try:
        value = read_scalar(text)
    except Exception as exc:  # YAMLError; NestedTooDeeply; ValueError on a bad date
        if spec.kind == "str":
            return text
        problem = f"{spec.dotted} is not a valid YAML value{yaml_failure(exc)}: {_quote(text)}"
        raise config_error(where, problem) from None
    if spec.kind == "str":
        if value is None:
            return None if spec.nullable else text
        if not isinstance(value, str):
            return text
    return value
