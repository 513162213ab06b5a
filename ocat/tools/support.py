"""Which chat models are offered tools: `tools.enabled`, what litellm knows of the model, and the
models a provider has refused tools for, remembered so the next run asks them without.

A model litellm says cannot call functions is not offered tools; one it does not know (a local
server's, a new model) is, and if the provider refuses them (an HTTP 400 naming tools), the turn
asks again without, and the model is written to `~/.local/state/ocat/tools.json`.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from ocat.config.locations import state_dir
from ocat.llm import model_calls_tools

if TYPE_CHECKING:
    from ocat.config.settings import Settings


def refusing_models() -> set[str]:
    """The models a provider refused tools for (an unreadable file counts as none)."""
    try:
        data = json.loads(state_dir().joinpath("tools.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    listed = data.get("refused") if isinstance(data, dict) else None
    return {m for m in listed if isinstance(m, str)} if isinstance(listed, list) else set()


def remember_refusal(model: str) -> None:
    """Keep that `model` refuses tools, for the next runs (a failure to write loses only that)."""
    path = state_dir() / "tools.json"
    refused = sorted(refusing_models() | {model})
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".tmp")
        partial.write_text(json.dumps({"refused": refused}, indent=2) + "\n", encoding="utf-8")
        os.replace(partial, path)
    except OSError:
        pass


def offer_tools(settings: Settings) -> bool:
    """Whether this chat's model is offered tools at all (memory on or not: the caller decides
    which tools)."""
    mode = settings.tools.enabled
    if mode == "off":
        return False
    if mode == "on":
        return True
    if settings.llm.model in refusing_models():
        return False
    return model_calls_tools(settings.llm) is not False
