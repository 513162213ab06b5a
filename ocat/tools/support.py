"""Which chat models are offered tools: `tools.enabled`, what litellm knows of the model, and the
models a provider has refused tools for, remembered so the next run asks them without.

A model litellm says cannot call functions is not offered tools; one it does not know (a local
server's, a new model) is, and if the provider says it takes no tools (ocat.llm.tool_errors), the
turn asks again without, and the model with its `llm.api_base` (one server may take tools where
another serving the same name does not) is written to `~/.local/state/ocat/tools.json`.
`/tools reset` forgets it. Entries of the older form (a model's name alone) are not read: an
older ocat wrote one for any HTTP 400 that mentioned a function, so they may be wrong.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from ocat.config.locations import state_dir
from ocat.llm import model_calls_tools

if TYPE_CHECKING:
    from ocat.config.loading import LLMSettings
    from ocat.config.settings import Settings


def _entry(llm: LLMSettings) -> dict[str, str]:
    return {"model": llm.model, "api_base": llm.api_base or ""}


def _refusals() -> list[dict[str, str]]:
    """The refusals kept (an unreadable file counts as none)."""
    try:
        data = json.loads(state_dir().joinpath("tools.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    listed: Any = data.get("refused") if isinstance(data, dict) else None
    if not isinstance(listed, list):
        return []
    return [{"model": e["model"], "api_base": e.get("api_base") or ""} for e in listed
            if isinstance(e, dict) and isinstance(e.get("model"), str) and isinstance(e.get("api_base", ""), str)]


def refused(llm: LLMSettings) -> bool:
    """Whether a provider refused tools for this model at this `api_base`."""
    return _entry(llm) in _refusals()


def _write(refusals: list[dict[str, str]]) -> None:
    path = state_dir() / "tools.json"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".tmp")
        partial.write_text(json.dumps({"refused": refusals}, indent=2) + "\n", encoding="utf-8")
        os.replace(partial, path)
    except OSError:
        pass  # a failure to write loses only the memory of the refusal


def remember_refusal(llm: LLMSettings) -> None:
    """Keep that this model, at this `api_base`, takes no tools, for the next runs."""
    kept = _refusals()
    if _entry(llm) not in kept:
        _write([*kept, _entry(llm)])


def forget_refusal(llm: LLMSettings) -> bool:
    """Forget a refusal kept for this model at this `api_base`; whether there was one."""
    kept = _refusals()
    if _entry(llm) not in kept:
        return False
    _write([entry for entry in kept if entry != _entry(llm)])
    return True


def offer_tools(settings: Settings) -> bool:
    """Whether this chat's model is offered tools at all (memory on or not: the caller decides
    which tools)."""
    mode = settings.tools.enabled
    if mode == "off":
        return False
    if mode == "on":
        return True
    if refused(settings.llm):
        return False
    return model_calls_tools(settings.llm) is not False


class Refusals:
    """What a chat's provider refused: tools altogether (then none for the rest of the session, and
    the refusal is kept for later runs), or one tool's definition (left out for the session)."""

    def __init__(self) -> None:
        self.tools_on = True
        self.dropped: set[str] = set()
        # How many times what was refused changed (a turn's tools are made again then: ocat.chat.turn_inputs).
        self.changes = 0

    def all_tools(self, llm: LLMSettings) -> str:
        """The provider refused tools: no more for this model (here, and in later runs); the words to say once."""
        self.tools_on = False
        self.changes += 1
        remember_refusal(llm)
        return (f"{llm.model} does not take tools: asked again without them, and it will be "
                "from now on (/tools reset forgets it; tools.enabled: on insists)")

    def one_tool(self, name: str, why: str) -> str:
        """The provider refused one tool's definition: that tool is left out for the rest of the
        session (the others stay); the words to say."""
        self.dropped.add(name)
        self.changes += 1
        return (f"the provider refused the tool {name} ({why}): asked again without it, and this chat goes "
                "on without it (/tools reset offers it again)")

    def reset(self, llm: LLMSettings) -> str:
        """Offer tools again: forget the model's refusal (here and in later runs) and the tools
        left out this session; the words to say."""
        forgot = forget_refusal(llm)
        dropped = sorted(self.dropped)
        self.tools_on, self.dropped = True, set()
        self.changes += 1
        said = []
        if forgot:
            where = f" at {llm.api_base}" if llm.api_base else ""
            said.append(f"Forgot that {llm.model}{where} refused tools")
        if dropped:
            said.append(f"Offered again: {', '.join(dropped)}")
        if not said:
            return "Nothing to reset: no refusal of tools is kept for this model, and no tool was left out."
        return ". ".join(said) + ". The next turn offers them."
