"""The chat's remappable key bindings: which binding id each `keys.*` setting changes."""

from __future__ import annotations

from functools import cache

from ocat.config.settings import KeysSettings
from ocat.config.loading import shipped_settings

# Which binding each `keys.*` setting remaps.
_BINDING_IDS = {
    "send": "prompt.submit",
    "newline": "prompt.newline",
    "cancel": "app.cancel",
    "quit": "app.quit",
    "copy_answer": "app.copy_last",
    "copy_code": "app.copy_code",
    "editor": "app.edit_prompt",
    "memory": "app.memory",
    "messages": "prompt.messages",
    "fork": "message.fork",
}


@cache
def default_keys() -> KeysSettings:
    """The keys `config/default.yaml` gives each binding: the one place they are written."""
    return shipped_settings().keys


def keymap(keys: KeysSettings) -> dict[str, str]:
    """The Textual keymap (binding id -> keys) that the `keys` settings ask for."""
    return {binding: getattr(keys, name) for name, binding in _BINDING_IDS.items()}
