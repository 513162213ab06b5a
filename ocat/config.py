"""Typed settings: shipped defaults < user YAML < OCAT_* environment < command-line overrides."""

from __future__ import annotations

import difflib
import os
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from ocat import locations
from ocat.errors import ConfigError
from ocat.settings import (  # noqa: F401 - the schema, re-exported for callers
    SECTIONS,
    ChunkingSettings,
    DisplaySettings,
    EmbeddingSettings,
    KeysSettings,
    LLMSettings,
    Settings,
    VectorStoreSettings,
    _SECTION_CLASSES,
)

ENV_PREFIX = "OCAT_"
CONFIG_ENV = "OCAT_CONFIG"
# The OCAT_* variables that are not settings. Every other OCAT_* variable must name a
# setting (OCAT_<SECTION>_<KEY>), so that a misspelt one is an error, never silently ignored.
NON_SETTING_ENV: dict[str, str] = {
    CONFIG_ENV: "names the config file",
}
COMMAND_LINE = "command line"
DEFAULTS_FILE = locations.shipped_dir("config") / "default.yaml"  # shipped, documented key by key


@dataclass(frozen=True)
class _Spec:
    dotted: str  # section.key
    kind: str  # bool, int, float, str or list
    nullable: bool
    meta: Mapping[str, Any]


def _spec_for(section: str, cls: type) -> dict[str, _Spec]:
    hints = typing.get_type_hints(cls)
    specs = {}
    for f in fields(cls):
        hint = hints[f.name]
        args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        base = next(a for a in args if a is not type(None))
        kind = "list" if typing.get_origin(base) is list else base.__name__
        specs[f.name] = _Spec(f"{section}.{f.name}", kind, type(None) in args, f.metadata)
    return specs


_SPECS: dict[str, dict[str, _Spec]] = {s: _spec_for(s, c) for s, c in _SECTION_CLASSES.items()}


@dataclass(frozen=True)
class _Source:
    """Where a value came from: for messages, for resolving relative paths, and for blame."""

    label: str  # "FILE:LINE", an env var name, or "command line"
    base_dir: Path
    rank: int  # layer precedence; 0 is the shipped defaults


def _error(where: str, message: str) -> ConfigError:
    return ConfigError(f"config error: {where}: {message}")


def _unknown(what: str, name: str, known: list[str], show=lambda n: f"'{n}'") -> str:
    match = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {show(match[0])}?)" if match else ""
    return f"unknown {what} '{name}'{hint}"


# ---- validation ------------------------------------------------------------

_KIND_NAMES = {"bool": "true or false", "int": "an integer", "float": "a number",
               "str": "a string", "list": "a list of strings"}


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


def _check_type(spec: _Spec, value: Any) -> Any:
    if value is None and spec.nullable:
        return None
    ok = {
        "bool": isinstance(value, bool),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "str": isinstance(value, str),
        "list": isinstance(value, list) and all(isinstance(v, str) for v in value),
    }[spec.kind]
    if not ok:
        expected = _KIND_NAMES[spec.kind] + (" or null" if spec.nullable else "")
        raise _Invalid(f"must be {expected}, got {_describe(value)}")
    return float(value) if spec.kind == "float" else value


def _check_value(spec: _Spec, value: Any) -> None:
    m = spec.meta
    if "choices" in m and value not in m["choices"]:
        raise _Invalid(f"must be one of {', '.join(m['choices'])}, got {value!r}")
    if "pattern" in m and not m["pattern"][0].fullmatch(value):
        raise _Invalid(f"must be {m['pattern'][1]}, got {value!r}")
    lo, hi = m.get("lo"), m.get("hi")
    # Written as `not ...` so that NaN fails every range.
    if lo is not None and hi is not None and not lo <= value <= hi:
        raise _Invalid(f"must be between {lo} and {hi}, got {value}")
    if lo is not None and hi is None and not value >= lo:
        raise _Invalid(f"must be at least {lo}, got {value}")
    if "above" in m and not value > m["above"]:
        raise _Invalid(f"must be greater than {m['above']}, got {value}")


def _resolve(text: str, base_dir: Path) -> str:
    if not text.strip():
        raise _Invalid("must not be empty (use null for the default)")
    path = Path(text).expanduser()
    return os.path.abspath(path if path.is_absolute() else base_dir / path)


def _validate(spec: _Spec, value: Any, source: _Source) -> Any:
    """The value checked and normalised (floats, resolved paths), or a ConfigError."""
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
        raise _error(source.label, f"{spec.dotted} {exc}") from None


def _quote(text: str, limit: int = 60) -> str:
    """`text` quoted for a one-line message, cut short when long (a value can be any size)."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"... ({len(text)} characters)"


def _parse_text(spec: _Spec, text: str, where: str) -> Any:
    """An env or command-line string parsed as a YAML scalar.

    A string field keeps the text as written when YAML would turn it into something
    else, or cannot read it at all, so `off`, `1.5`, `Note: be brief` or `[[[...` stay
    strings rather than failing.
    """
    try:
        value = yaml.safe_load(text)
    except Exception as exc:  # YAMLError; RecursionError when nested deeply; ValueError on a bad date
        if spec.kind == "str":
            return text
        raise _error(where, f"{spec.dotted} is not a valid YAML value{_why(exc)}: {_quote(text)}") from None
    if spec.kind == "str":
        if value is None:
            return None if spec.nullable else text
        if not isinstance(value, str):
            return text
    return value


def _why(exc: BaseException) -> str:
    """Why YAML could not be read, for failures that are not YAMLError (whose text is its own)."""
    if isinstance(exc, RecursionError):
        return " (nested too deeply)"
    if isinstance(exc, yaml.YAMLError):
        return ""
    return f" ({type(exc).__name__}: {exc})"


# ---- layers -----------------------------------------------------------------
# A layer maps a dotted key to its (validated value, source).
_Layer = dict[str, tuple[Any, _Source]]


def _node_line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


def _node_kind(node: yaml.Node) -> str:
    return {yaml.MappingNode: "a mapping", yaml.SequenceNode: "a list"}.get(type(node)) or repr(node.value)


def _pairs(loader: yaml.SafeLoader, node: yaml.MappingNode, path: Path, what: str, prefix: str = ""):
    """(name, key node, value node) for each entry of a mapping, merge keys applied.

    A key written twice is an error: YAML would keep the last silently, and the person
    editing the first would wonder why nothing changes. Keys brought in by a merge key
    (`<<: *base`) may be overridden, as YAML means them to be.
    """
    _refuse_duplicates(node, path, what, prefix)
    loader.flatten_mapping(node)
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            raise _error(f"{path}:{_node_line(key_node)}", "keys must be plain names")
        yield key_node.value, key_node, value_node


def _refuse_duplicates(node: yaml.MappingNode, path: Path, what: str, prefix: str) -> None:
    first_line: dict[str, int] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
            continue
        line = _node_line(key_node)
        if key_node.value in first_line:
            raise _error(f"{path}:{line}", f"duplicate {what} '{prefix}{key_node.value}' "
                                           f"(lines {first_line[key_node.value]} and {line}); keep one")
        first_line[key_node.value] = line


def _file_layer(path: Path, rank: int, origin: str = "") -> _Layer:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config error: config file not found: {path}{origin}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config error: cannot read config file {path}: {exc}") from None
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return {}  # empty, or only comments
        return _walk(loader, root, path, rank)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        column = f" (column {mark.column + 1})" if mark else ""
        problem = ", ".join(part for part in (exc.context, exc.problem) if part)
        raise _error(where, f"invalid YAML: {problem}{column}") from None
    except yaml.YAMLError as exc:
        raise _error(str(path), f"invalid YAML: {exc}") from None
    except ConfigError:
        raise
    except Exception as exc:  # RecursionError when nested deeply, ...
        # The reader stopped where the trouble is (the bracket too many, say).
        raise _error(f"{path}:{loader.get_mark().line + 1}", f"invalid YAML{_why(exc)}") from None
    finally:
        loader.dispose()


def _walk(loader: yaml.SafeLoader, root: yaml.Node, path: Path, rank: int) -> _Layer:
    if not isinstance(root, yaml.MappingNode):
        raise _error(f"{path}:{_node_line(root)}",
                     f"the top level must be a mapping of sections, got {_node_kind(root)}")
    layer: _Layer = {}
    for section, section_key, section_node in _pairs(loader, root, path, "section"):
        where = f"{path}:{_node_line(section_key)}"
        if section not in _SPECS:
            raise _error(where, _unknown("section", section, list(SECTIONS)))
        if section_node.tag == "tag:yaml.org,2002:null":
            continue  # `llm:` with every key commented out
        if not isinstance(section_node, yaml.MappingNode):
            kind = _node_kind(section_node)
            raise _error(where, f"section '{section}' must be a mapping of keys, got {kind}")
        for key, key_node, value_node in _pairs(loader, section_node, path, "key", f"{section}."):
            source = _Source(f"{path}:{_node_line(key_node)}", path.parent, rank)
            spec = _lookup(f"{section}.{key}", source.label)
            value = _construct(loader, value_node, spec, source)
            # A plain `off` or `1.5` in a string field means the text, not YAML's bool or float.
            if (spec.kind == "str" and value is not None and not isinstance(value, str)
                    and isinstance(value_node, yaml.ScalarNode) and value_node.style is None):
                value = value_node.value
            layer[spec.dotted] = (_validate(spec, value, source), source)
    return layer


def _construct(loader: yaml.SafeLoader, node: yaml.Node, spec: _Spec, source: _Source) -> Any:
    """The value of a node, or a ConfigError at its line (a date like 2020-13-45 raises ValueError)."""
    try:
        return loader.construct_document(node)
    except yaml.YAMLError:
        raise
    except Exception as exc:
        if spec.kind == "str" and isinstance(node, yaml.ScalarNode) and node.style is None:
            return node.value  # a plain scalar in a string field is its text, as in _walk
        raise _error(source.label, f"{spec.dotted} is not a valid YAML value{_why(exc)}") from None


def _env_layer(env: Mapping[str, str]) -> _Layer:
    # Longest prefix first, in case one section's name ever starts with another's.
    prefixes = sorted(((f"{ENV_PREFIX}{s.upper()}_", s) for s in SECTIONS), key=lambda p: -len(p[0]))
    layer: _Layer = {}
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX) or name in NON_SETTING_ENV:
            continue
        match = next(((p, s) for p, s in prefixes if name.startswith(p)), None)
        if match is None:
            raise _error(name, _unknown_variable(name))
        prefix, section = match
        spec = _lookup(f"{section}.{name[len(prefix):].lower()}", name, show=_env_name)
        source = _Source(name, Path.cwd(), 2)
        layer[spec.dotted] = (_validate(spec, _parse_text(spec, env[name], name), source), source)
    return layer


def _unknown_variable(name: str) -> str:
    known = [_env_name(spec.dotted) for specs in _SPECS.values() for spec in specs.values()]
    message = _unknown("variable", name, known + list(NON_SETTING_ENV), show=str)
    others = ", ".join(NON_SETTING_ENV)
    return f"{message}; OCAT_* variables are settings (OCAT_<SECTION>_<KEY>) or {others}"


def _env_name(dotted: str) -> str:
    return ENV_PREFIX + dotted.replace(".", "_").upper()


def _lookup(dotted: str, where: str, show=lambda n: f"'{n}'") -> _Spec:
    """The spec of a dotted key given in `where`; `show` formats a suggestion."""
    section, dot, key = dotted.partition(".")
    if not dot:
        raise _error(where, f"unknown key '{dotted}' (keys look like section.key, e.g. llm.model)")
    if section not in _SPECS:
        raise _error(where, _unknown("section", section, list(SECTIONS)))
    if key not in _SPECS[section]:
        known = [f"{section}.{k}" for k in _SPECS[section]]
        raise _error(where, _unknown("key", dotted, known, show))
    return _SPECS[section][key]


def _override_layer(overrides: Mapping[str, object]) -> _Layer:
    source = _Source(COMMAND_LINE, Path.cwd(), 3)
    layer: _Layer = {}
    for dotted, value in overrides.items():
        spec = _lookup(dotted, COMMAND_LINE)
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if isinstance(value, str):
            value = _parse_text(spec, value, COMMAND_LINE)
        layer[spec.dotted] = (_validate(spec, value, source), source)
    return layer


def parse_override(text: str) -> tuple[str, object]:
    """`section.key=value` from the command line, the value parsed like an env var."""
    key, eq, value = text.partition("=")
    key = key.strip()
    if not eq:
        raise _error(COMMAND_LINE, f"expected section.key=value, got {text!r}")
    return key, _parse_text(_lookup(key, COMMAND_LINE), value, COMMAND_LINE)


# ---- assembly ---------------------------------------------------------------

def _check_order(merged: _Layer, low: str, high: str, *, strict: bool) -> None:
    """low < high (strict) or low <= high, blaming whichever key was set in the later layer."""
    (a, a_src), (b, b_src) = merged[low], merged[high]
    if a < b or (a == b and not strict):
        return
    if b_src.rank > a_src.rank:
        bound = "greater than" if strict else "at least"
        raise _error(b_src.label, f"{high} must be {bound} {low} ({a}), got {b}")
    bound = "less than" if strict else "at most"
    raise _error(a_src.label, f"{low} must be {bound} {high} ({b}), got {a}")


def _user_file(config_path: str | None, env: Mapping[str, str]) -> tuple[Path | None, str]:
    """The user file to read (or None) and, for messages, where its name came from."""
    if config_path is not None:
        return Path(os.path.abspath(Path(config_path).expanduser())), ""
    named = env.get(CONFIG_ENV, "").strip()
    if named:
        return Path(os.path.abspath(Path(named).expanduser())), f" (from {CONFIG_ENV})"
    default = locations.user_config_file()
    return (default if default.is_file() else None), ""


def load_settings(config_path: str | None = None, *, env: Mapping[str, str] | None = None,
                  overrides: Mapping[str, object] | None = None) -> Settings:
    """Settings from the shipped defaults, the user file, `OCAT_*` variables and overrides.

    `config_path` wins over `OCAT_CONFIG`, which wins over the XDG user file; `env`
    defaults to `os.environ`. Raises ConfigError naming the key and where it was set.
    """
    env = os.environ if env is None else env
    user_file, origin = _user_file(config_path, env)
    layers = [_file_layer(DEFAULTS_FILE, 0)]
    if user_file is not None:
        layers.append(_file_layer(user_file, 1, origin))
    layers += [_env_layer(env), _override_layer(overrides or {})]

    merged: _Layer = {}
    for layer in layers:
        merged.update(layer)
    missing = [spec.dotted for specs in _SPECS.values() for spec in specs.values() if spec.dotted not in merged]
    if missing:
        raise _error(str(DEFAULTS_FILE), f"missing key '{missing[0]}'")
    _check_order(merged, "chunking.chunk_size", "chunking.max_chunk_size", strict=False)
    _check_order(merged, "chunking.chunk_overlap", "chunking.chunk_size", strict=True)

    sections = {
        section: cls(**{key: merged[f"{section}.{key}"][0] for key in _SPECS[section]})
        for section, cls in _SECTION_CLASSES.items()
    }
    settings = Settings(**sections, config_path=str(user_file) if user_file is not None else None)
    _remember_secrets(settings)
    return settings


def _remember_secrets(settings: Settings) -> None:
    """Have error messages mask the configured key and any password in llm.api_base."""
    from urllib.parse import urlsplit

    from ocat.redact import remember_secret

    remember_secret(settings.llm.api_key)
    try:
        remember_secret(urlsplit(settings.llm.api_base or "").password)
    except ValueError:
        pass  # not a URL that has a password
