"""Typed settings: shipped defaults < user YAML < OCAT_* environment < command-line overrides.

This module layers the sources and builds the Settings; `ocat.config.settings` holds the schema,
`ocat.config.keys` the checks of one value and `ocat.config.file` the reading of a YAML file.
"""

from __future__ import annotations

import os
from functools import cache
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from ocat.config import locations
from ocat.config.file import file_layer
from ocat.config.mcp_servers import McpServerConfig, merged as merge_servers, read_servers_file
from ocat.config.keys import (
    ENV_PREFIX,
    SPECS,
    Layer,
    Source,
    config_error,
    env_name,
    lookup,
    parse_text,
    put,
    unknown_name,
)
from ocat.config.settings import (
    CONTEXT_MODES,
    HEADER_VARIABLE,
    SECTION_CLASSES,
    SECTIONS,
    ChunkingSettings,
    DisplaySettings,
    EmbeddingSettings,
    KeysSettings,
    MCP_SERVERS,
    LLMSettings,
    Settings,
    ToolsSettings,
    VectorStoreSettings,
)
from ocat.text.redact import remember_secret

# The schema and the key helpers are re-exported: callers import them from here.
__all__ = [
    "COMMAND_LINE", "CONFIG_ENV", "CONTEXT_MODES", "DEFAULTS_FILE", "ENV_PREFIX", "NON_SETTING_ENV", "SECTIONS",
    "SPECS", "ChunkingSettings", "DisplaySettings", "EmbeddingSettings", "KeysSettings",
    "LLMSettings", "Settings", "VectorStoreSettings", "env_name", "load_settings", "parse_override",
    "shipped_settings",
]

CONFIG_ENV = "OCAT_CONFIG"
# The OCAT_* variables that are not settings. Every other OCAT_* variable must name a
# setting (OCAT_<SECTION>_<KEY>), so that a misspelt one is an error, never silently ignored.
NON_SETTING_ENV: dict[str, str] = {
    CONFIG_ENV: "names the config file",
    "OCAT_STORE_TOKEN": "holds the Chroma server's token that vector_store.headers reads (docs/two-machines.md)",
}
COMMAND_LINE = "command line"
DEFAULTS_FILE = locations.shipped_dir("config") / "default.yaml"  # shipped, documented key by key


# ---- environment and command line ---------------------------------------------

def _env_layer(env: Mapping[str, str], read_by_headers: frozenset[str] = frozenset()) -> Layer:
    # Longest prefix first, in case one section's name ever starts with another's.
    prefixes = sorted(((f"{ENV_PREFIX}{s.upper()}_", s) for s in SECTIONS), key=lambda p: -len(p[0]))
    layer: Layer = {}
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX) or name in NON_SETTING_ENV or name in read_by_headers:
            continue
        match = next(((p, s) for p, s in prefixes if name.startswith(p)), None)
        if match is None:
            raise config_error(name, _unknown_variable(name))
        prefix, section = match
        written = f"{section}.{name[len(prefix):].lower()}"
        spec = lookup(written, name, show=env_name)
        source = Source(name, Path.cwd(), 2)
        put(layer, written, spec, parse_text(spec, env[name], name), source, show=env_name)
    return layer


def _header_variables(layers: list[Layer]) -> frozenset[str]:
    """The variables `vector_store.headers` reads (`${OCAT_STORE_TOKEN}`): not settings, though named OCAT_*."""
    names: set[str] = set()
    for layer in layers:
        headers: dict[str, str] = layer["vector_store.headers"][0] if "vector_store.headers" in layer else {}
        for value in (headers or {}).values():
            names.update(HEADER_VARIABLE.findall(value))
    return frozenset(names)


def _unknown_variable(name: str) -> str:
    known = [env_name(spec.dotted) for specs in SPECS.values() for spec in specs.values()]
    message = unknown_name("variable", name, known + list(NON_SETTING_ENV), show=str)
    others = ", ".join(NON_SETTING_ENV)
    return f"{message}; OCAT_* variables are settings (OCAT_<SECTION>_<KEY>) or {others}"


def _override_layer(overrides: Mapping[str, object]) -> Layer:
    source = Source(COMMAND_LINE, Path.cwd(), 3)
    layer: Layer = {}
    for dotted, value in overrides.items():
        spec = lookup(dotted, COMMAND_LINE)
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if isinstance(value, str):
            value = parse_text(spec, value, COMMAND_LINE)
        put(layer, dotted, spec, value, source)
    return layer


def parse_override(text: str) -> tuple[str, object]:
    """`section.key=value` from the command line, the value parsed like an env var."""
    key, eq, value = text.partition("=")
    key = key.strip()
    if not eq:
        raise config_error(COMMAND_LINE, f"expected section.key=value, got {text!r}")
    return key, parse_text(lookup(key, COMMAND_LINE), value, COMMAND_LINE)


# ---- assembly ---------------------------------------------------------------

def _check_order(merged: Layer, low: str, high: str, *, strict: bool) -> None:
    """low < high (strict) or low <= high, blaming whichever key was set in the later layer."""
    (a, a_src), (b, b_src) = merged[low], merged[high]
    if a < b or (a == b and not strict):
        return
    if b_src.rank > a_src.rank:
        bound = "greater than" if strict else "at least"
        raise config_error(b_src.label, f"{high} must be {bound} {low} ({a}), got {b}")
    bound = "less than" if strict else "at most"
    raise config_error(a_src.label, f"{low} must be {bound} {high} ({b}), got {a}")


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
    layers = [_shipped_layer()]
    if user_file is not None:
        layers.append(file_layer(user_file, 1, origin))
    given = _override_layer(overrides or {})
    layers += [_env_layer(env, _header_variables([*layers, given])), given]
    settings = _assemble(layers, config_path=str(user_file) if user_file is not None else None)
    _remember_secrets(settings)
    return settings


def shipped_settings() -> Settings:
    """The settings of `config/default.yaml` alone: no user file, environment or flags."""
    return _assemble([_shipped_layer()], config_path=None)


@cache
def _shipped_layer() -> Layer:
    # Read once per process: the key bindings and the settings both start from it before the
    # first frame, and parsing it is most of what loading settings costs. Callers copy from it.
    return file_layer(DEFAULTS_FILE, 0, shipped=True)


def _assemble(layers: list[Layer], *, config_path: str | None) -> Settings:
    """Settings from layers, lowest precedence first, with the checks that span keys."""
    merged: Layer = {}
    for layer in layers:
        merged.update(layer)
    missing = [spec.dotted for specs in SPECS.values() for spec in specs.values() if spec.dotted not in merged]
    if missing:
        raise config_error(str(DEFAULTS_FILE), f"missing key '{missing[0]}'")
    _check_order(merged, "chunking.chunk_size", "chunking.max_chunk_size", strict=False)
    _check_order(merged, "chunking.chunk_overlap", "chunking.chunk_size", strict=True)

    sections = {
        section: cls(**{key: merged[f"{section}.{key}"][0] for key in SPECS[section]})
        for section, cls in SECTION_CLASSES.items()
    }
    named = frozenset(key for key, (_, source) in merged.items() if source.rank > 0)
    # Every old name used, in any layer (one overridden by a later layer was still written).
    deprecations = tuple(dict.fromkeys(source.deprecation for layer in layers for _, source in layer.values()
                                       if source.deprecation))
    return Settings(**sections, mcp_servers=_mcp_servers(merged, sections["tools"]), config_path=config_path,
                    named=named, deprecations=deprecations)


def _mcp_servers(merged: Layer, tools: ToolsSettings) -> tuple[McpServerConfig, ...]:
    """The config's `mcp_servers`, then those of `tools.mcp_servers_file` it does not name."""
    own: tuple[McpServerConfig, ...] = merged[MCP_SERVERS][0] if MCP_SERVERS in merged else ()
    if tools.mcp_servers_file is None:
        return own
    return merge_servers(own, read_servers_file(Path(tools.mcp_servers_file)))


def _remember_secrets(settings: Settings) -> None:
    """Have error messages mask the configured key and any password in llm.api_base."""
    remember_secret(settings.llm.api_key)
    try:
        remember_secret(urlsplit(settings.llm.api_base or "").password)
    except ValueError:
        pass  # not a URL that has a password
