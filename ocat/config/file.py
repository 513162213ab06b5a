"""One YAML config file read into checked values, each remembering its file and line.

PyYAML's node tree is walked rather than its loaded dict, so that an unknown key, a key
written twice or a bad value is reported at the line where it is written.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from ocat.config.keys import SPECS, Layer, Source, Spec, config_error, lookup, put, unknown_name
from ocat.config.yaml_read import FAST_LOADER, too_deep_line, yaml_failure
from ocat.errors import ConfigError
from ocat.config.mcp_servers import parse_servers
from ocat.config.settings import MCP_SERVERS, SECTIONS

# libyaml's parser, when PyYAML has it, reads the shipped config (valid, and read before the
# first frame): in a millisecond instead of ~17, as the pure-Python scanner walks every
# comment character. A user's file goes through the pure-Python parser, whose messages name
# what is wrong more plainly. A plain scalar's style is None from one and "" from the other:
# `not node.style` reads both.
_MERGE_TAG = "tag:yaml.org,2002:merge"
_NULL_TAG = "tag:yaml.org,2002:null"


def file_layer(path: Path, rank: int, origin: str = "", *, shipped: bool = False) -> Layer:
    """The settings a config file sets, checked; `origin` says where its name came from, for messages.

    Raises ConfigError naming the file and line of the first problem.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config error: config file not found: {path}{origin}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config error: cannot read config file {path}: {exc}") from None
    deep = too_deep_line(text)
    if deep is not None:  # refused before the pure-Python parser spends a second on it (yaml_read)
        raise config_error(f"{path}:{deep}", "invalid YAML (nested too deeply)")
    loader = (FAST_LOADER if shipped else yaml.SafeLoader)(text)
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
        raise config_error(where, f"invalid YAML: {problem}{column}") from None
    except yaml.YAMLError as exc:
        raise config_error(str(path), f"invalid YAML: {exc}") from None
    except ConfigError:
        raise
    except Exception as exc:  # RecursionError when nested deeply, ...
        # The reader stopped where the trouble is (the bracket too many, say).
        raise config_error(f"{path}:{loader.get_mark().line + 1}", f"invalid YAML{yaml_failure(exc)}") from None
    finally:
        loader.dispose()


def _node_line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


def _node_kind(node: yaml.Node) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    return repr(node.value)


def _pairs(
    loader: yaml.SafeLoader, node: yaml.MappingNode, path: Path, what: str, prefix: str = ""
) -> Iterator[tuple[str, yaml.Node, yaml.Node]]:
    """(name, key node, value node) for each entry of a mapping, merge keys applied.

    A key written twice is an error: YAML would keep the last silently, and the person
    editing the first would wonder why nothing changes. Keys brought in by a merge key
    (`<<: *base`) may be overridden, as YAML means them to be.
    """
    _refuse_duplicates(node, path, what, prefix)
    loader.flatten_mapping(node)
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            raise config_error(f"{path}:{_node_line(key_node)}", "keys must be plain names")
        yield key_node.value, key_node, value_node


def _refuse_duplicates(node: yaml.MappingNode, path: Path, what: str, prefix: str) -> None:
    first_line: dict[str, int] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE_TAG:
            continue
        line = _node_line(key_node)
        if key_node.value in first_line:
            raise config_error(f"{path}:{line}", f"duplicate {what} '{prefix}{key_node.value}' "
                                                 f"(lines {first_line[key_node.value]} and {line}); keep one")
        first_line[key_node.value] = line


def _walk(loader: yaml.SafeLoader, root: yaml.Node, path: Path, rank: int) -> Layer:
    if not isinstance(root, yaml.MappingNode):
        raise config_error(f"{path}:{_node_line(root)}",
                           f"the top level must be a mapping of sections, got {_node_kind(root)}")
    layer: Layer = {}
    for section, section_key, section_node in _pairs(loader, root, path, "section"):
        where = f"{path}:{_node_line(section_key)}"
        if section == MCP_SERVERS:
            # Not keys of a section but named entries of any name (ocat.config.mcp_servers checks them).
            entries = _construct_entries(loader, section_node, where)
            layer[MCP_SERVERS] = (parse_servers(entries, where, path.parent), Source(where, path.parent, rank))
            continue
        if section not in SPECS:
            raise config_error(where, unknown_name("section", section, [*SECTIONS, MCP_SERVERS]))
        if section_node.tag == _NULL_TAG:
            continue  # `llm:` with every key commented out
        if not isinstance(section_node, yaml.MappingNode):
            kind = _node_kind(section_node)
            raise config_error(where, f"section '{section}' must be a mapping of keys, got {kind}")
        for key, key_node, value_node in _pairs(loader, section_node, path, "key", f"{section}."):
            source = Source(f"{path}:{_node_line(key_node)}", path.parent, rank)
            spec = lookup(f"{section}.{key}", source.label)
            value = _construct(loader, value_node, spec, source)
            # A plain `off` or `1.5` in a string field means the text, not YAML's bool or float.
            if (spec.kind == "str" and value is not None and not isinstance(value, str)
                    and isinstance(value_node, yaml.ScalarNode) and not value_node.style):
                value = value_node.value
            put(layer, f"{section}.{key}", spec, value, source)
    return layer


def _construct_entries(loader: yaml.SafeLoader, node: yaml.Node, where: str) -> Any:
    """The `mcp_servers` mapping as plain values (YAML's errors at their line)."""
    try:
        return loader.construct_document(node)
    except yaml.YAMLError:
        raise
    except Exception as exc:
        raise config_error(where, f"mcp_servers is not a valid YAML value{yaml_failure(exc)}") from None


def _construct(loader: yaml.SafeLoader, node: yaml.Node, spec: Spec, source: Source) -> Any:
    """The value of a node, or a ConfigError at its line (a date like 2020-13-45 raises ValueError)."""
    try:
        return loader.construct_document(node)
    except yaml.YAMLError:
        raise
    except Exception as exc:
        if spec.kind == "str" and isinstance(node, yaml.ScalarNode) and not node.style:
            return node.value  # a plain scalar in a string field is its text, as in _walk
        raise config_error(source.label, f"{spec.dotted} is not a valid YAML value{yaml_failure(exc)}") from None
