"""Where ocat keeps things: XDG config, data, state and cache folders, and its shipped files."""

from __future__ import annotations

import os
from pathlib import Path

APP_NAME = "ocat"


def _xdg(var: str, fallback: str) -> Path:
    value = os.environ.get(var, "").strip()
    # The XDG spec says relative values are invalid and must be ignored.
    if value and os.path.isabs(value):
        return Path(value)
    return Path.home() / fallback


def config_dir() -> Path:
    """The user's ocat config folder (`$XDG_CONFIG_HOME/ocat`)."""
    return _xdg("XDG_CONFIG_HOME", ".config") / APP_NAME


def data_dir() -> Path:
    """The user's ocat data folder (`$XDG_DATA_HOME/ocat`)."""
    return _xdg("XDG_DATA_HOME", ".local/share") / APP_NAME


def cache_dir() -> Path:
    """The user's cache folder (`$XDG_CACHE_HOME`), not ocat's own sub-folder."""
    return _xdg("XDG_CACHE_HOME", ".cache")


def state_dir() -> Path:
    """The user's ocat state folder (`$XDG_STATE_HOME/ocat`): the log lives here."""
    return _xdg("XDG_STATE_HOME", ".local/state") / APP_NAME


def choices_file() -> Path:
    """The choices made in the chat (/theme, /showcontext) that outlast it (ocat.choices)."""
    return state_dir() / "choices.json"


def user_config_file() -> Path:
    """The config file read when `--config` and `OCAT_CONFIG` are not given."""
    return config_dir() / "config.yaml"


def default_store_path(collection: str = "default") -> Path:
    """Where a store lives unless `vector_store.path` says otherwise."""
    return data_dir() / "vector_stores" / collection


def shipped_dir(name: str) -> Path:
    """A folder shipped with ocat (`config` or `themes`).

    In a wheel they are package data under `ocat/_shipped/`; in a source checkout
    (editable install, tests) they are the top-level folders of the repository.
    """
    here = Path(__file__).resolve().parent.parent  # the ocat package (this module is in ocat/config/)
    packaged = here / "_shipped" / name
    if packaged.is_dir():
        return packaged
    return here.parent / name


def display_path(path: str | Path) -> str:
    """A path as people read it: under the home folder it starts with `~`."""
    text, home = str(path), str(Path.home())
    return "~" + text[len(home) :] if text == home or text.startswith(home + os.sep) else text
