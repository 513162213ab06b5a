"""Choices made in the chat that outlast it: the theme (/theme) and the context display (/showcontext).

The rule: a saved choice is used when the config does not name the key, that is when neither
the user file, an `OCAT_*` variable nor a flag sets it; whatever the config names wins. The
choices live in a small JSON file in the XDG state folder (`locations.choices_file`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import TYPE_CHECKING

from ocat.config.locations import choices_file
from ocat.config.settings import CONTEXT_MODES

if TYPE_CHECKING:
    from ocat.config.settings import Settings

# The settings a chat command may choose for later runs (dotted keys).
SAVED_KEYS = ("display.theme", "display.context_mode")


def saved_choices() -> dict[str, str]:
    """The saved choices; an unreadable or odd file counts as none (it is only a convenience)."""
    try:
        data = json.loads(choices_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {key: value for key, value in data.items() if key in SAVED_KEYS and isinstance(value, str)}


def save_choice(key: str, value: str) -> None:
    """Remember `key` = `value` for the next runs; a failure to write only loses the convenience."""
    choices = {**saved_choices(), key: value}
    path = choices_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".tmp")
        partial.write_text(json.dumps(choices, indent=2) + "\n", encoding="utf-8")
        os.replace(partial, path)  # whole or not at all: two chats saving at once never mix
    except OSError:
        pass


def with_saved_choices(settings: Settings) -> Settings:
    """`settings` with the saved choices applied to the keys the config does not name.

    A saved value that is no longer valid (a context mode from another version) is ignored; a
    theme is checked by the window, which reports an unknown one.
    """
    display = settings.display
    for key, value in saved_choices().items():
        if key in settings.named:
            continue
        if key == "display.theme":
            display = dataclasses.replace(display, theme=value)
        for mode in CONTEXT_MODES:  # a saved mode no longer known is left out
            if key == "display.context_mode" and value == mode:
                display = dataclasses.replace(display, context_mode=mode)
    return settings if display == settings.display else dataclasses.replace(settings, display=display)
