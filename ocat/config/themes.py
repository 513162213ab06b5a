"""Themes as YAML files: the ones shipped in `themes/` and the user's own, checked before use.

Each file holds the fields of a Textual `Theme` (name, primary, and optionally secondary,
accent, background, surface, panel, foreground, warning, error, success, dark). This module
only reads and checks them; the app turns them into Textual themes.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
import yaml

from ocat.config.locations import config_dir, shipped_dir

COLOUR_FIELDS = (
    "primary", "secondary", "accent", "background", "surface", "panel", "foreground", "warning", "error", "success",
)
_HEX = re.compile(r"#(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6}|[0-9a-fA-F]{8})")
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*")


def theme_folders() -> list[Path]:
    """Where themes are looked for: shipped ones first, then the user's (which win on a name clash)."""
    return [shipped_dir("themes"), config_dir() / "themes"]


def check_theme(data: Any, source: str) -> dict[str, Any]:
    """A theme file's content as Theme keyword arguments, or ValueError saying what is wrong."""
    if not isinstance(data, dict):
        raise ValueError(f"{source}: a theme file holds a mapping of theme fields")
    unknown = set(data) - {"name", "dark", *COLOUR_FIELDS}
    if unknown:
        raise ValueError(f"{source}: unknown field{'s' if len(unknown) > 1 else ''} {', '.join(sorted(unknown))}")
    name = data.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"{source}: 'name' must be lower-case letters, digits, '-' or '_'")
    if "primary" not in data:
        raise ValueError(f"{source}: 'primary' is required")
    for key in COLOUR_FIELDS:
        value = data.get(key)
        if value is not None and (not isinstance(value, str) or not _HEX.fullmatch(value)):
            raise ValueError(f"{source}: {key} must be a hex colour like '#7aa2f7', got {value!r}")
    if "dark" in data and not isinstance(data["dark"], bool):
        raise ValueError(f"{source}: 'dark' must be true or false")
    return dict(data)


def load_themes(folders: list[Path] | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """Every valid theme in the folders, and a message for each file that is not one."""
    themes: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for folder in folders if folders is not None else theme_folders():
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.y*ml")):
            try:
                spec = check_theme(yaml.safe_load(path.read_text(encoding="utf-8")), str(path))
            except ValueError as exc:  # check_theme's messages already name the file
                problems.append(f"theme skipped: {exc}")
                continue
            except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
                mark = getattr(exc, "problem_mark", None)
                where = f":{mark.line + 1}" if mark is not None else ""
                problems.append(f"theme skipped: {path}{where}: not a readable YAML theme")
                continue
            themes[spec["name"]] = spec
    return list(themes.values()), problems
