"""The tools a turn offers, and running one call of them: arguments checked, result bounded, any
failure turned into a tool error the model reads (the turn goes on).

A model's call is a request, not a command: its arguments are JSON the model wrote, checked
against the tool's schema before anything runs; an unknown tool, bad arguments, a tool that
raises, and a result over the budget each come back to the model as a tool result that says so.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ocat.errors import OcatError
from ocat.tools.calls import CallState, ToolCall

log = logging.getLogger(__name__)

# JSON Schema's types, as Python checks them (bool is no integer here, as in JSON).
_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
}


class ToolFailed(OcatError):
    """A tool could not do what it was asked (bad input it found itself): the model reads why."""


@dataclass(frozen=True)
class ToolOutcome:
    """What one call of a tool gave: the text the model reads, a line the faces show, and the
    record ids it returned (kept with the exchange)."""

    text: str
    summary: str
    ids: tuple[str, ...] = ()
    count: int | None = None
    # Set when the call changed memory (remember): what the faces say about it.
    changed: str | None = None


@dataclass(frozen=True)
class ToolSpec:
    """A tool: its name, what it is for, its arguments (a JSON schema), and what runs it."""

    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[[dict[str, Any]], ToolOutcome]
    # Gives up the tool's calls under way (Esc); None for a tool whose calls are quick and local.
    cancel: Callable[[], None] | None = None
    # What the faces call it (server.tool for an MCP server's tool); the name when empty.
    label: str = ""

    def schema(self) -> dict[str, Any]:
        """The tool as a provider is offered it (OpenAI's function format)."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}


class ToolBox:
    """The tools of one turn, and the limits each result is kept to."""

    def __init__(self, specs: Sequence[ToolSpec], *, result_tokens: int, count: Callable[[str], int]) -> None:
        self.specs = {spec.name: spec for spec in specs}
        self.result_tokens = result_tokens
        self.count = count

    def __bool__(self) -> bool:
        return bool(self.specs)

    def drop(self, name: str) -> None:
        """Leave the tool `name` out (a provider refused its definition)."""
        self.specs.pop(name, None)

    def schemas(self) -> list[dict[str, Any]]:
        """Every tool, as the provider is offered them."""
        return [spec.schema() for spec in self.specs.values()]

    def cancel(self) -> None:
        """Give up the calls under way (the turn was cancelled)."""
        for hook in {spec.cancel for spec in self.specs.values() if spec.cancel is not None}:
            hook()

    def start(self, call: ToolCall) -> None:
        """The call begins: from now on the faces show it under its tool's label (server.tool)."""
        spec = self.specs.get(call.name)
        call.label = spec.label if spec is not None else ""
        call.start()

    def run(self, call: ToolCall) -> ToolCall:
        """Run one call: check it, run it, bound its result; any failure is the call's error and
        the model's tool result, never the turn's. Returns the call, filled in. A call the turn
        started already (`start`, when it showed it) is not started again: its time runs from then."""
        if call.state is CallState.ASKED:
            self.start(call)
        try:
            spec = self.specs.get(call.name)
            if spec is None:
                known = ", ".join(sorted(self.specs)) or "none"
                raise ToolFailed(f"there is no tool {call.name!r}; the tools are: {known}")
            call.parsed = parse_arguments(call.arguments, spec.parameters)
            outcome = spec.run(call.parsed)
        except ToolFailed as exc:
            return _failed(call, str(exc))
        except OcatError as exc:  # the store or the model said no: a tool's failure, in its words
            return _failed(call, str(exc))
        except Exception as exc:  # a bug: one line for the model and the faces, the traceback in the log
            log.warning("the tool %s failed", call.name, exc_info=True)
            return _failed(call, f"the tool failed unexpectedly ({type(exc).__name__}: {exc})")
        call.result = self._bounded(outcome.text)
        call.summary, call.ids, call.count, call.changed = outcome.summary, outcome.ids, outcome.count, outcome.changed
        call.end()
        return call

    def _bounded(self, text: str) -> str:
        """`text` within `result_tokens`: cut at a line where it can be, with a note saying so."""
        if self.count(text) <= self.result_tokens:
            return text
        # Characters per token of this text, to guess the cut; then trimmed until it fits.
        chars = max(1, int(len(text) * self.result_tokens / max(1, self.count(text))))
        kept = text[:chars]
        while kept and self.count(kept) > self.result_tokens - 40:
            kept = kept[: int(len(kept) * 0.9)]
        cut = kept.rfind("\n")
        kept = kept[:cut] if cut > len(kept) // 2 else kept
        return f"{kept}\n(cut to stay within {self.result_tokens} tokens; ask for less, or more precisely)"


def _failed(call: ToolCall, why: str) -> ToolCall:
    call.fail(why)
    return call


def parse_arguments(text: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The arguments of a call, checked against the tool's schema (types, required fields, enum
    values, ranges, no unknown fields); ToolFailed naming what is wrong."""
    try:
        value = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise ToolFailed(f"the arguments are not JSON ({exc.msg} at character {exc.pos}): {text[:200]!r}") from None
    if not isinstance(value, dict):
        raise ToolFailed(f"the arguments must be a JSON object, not {type(value).__name__}")
    properties: dict[str, Any] = schema.get("properties", {})
    missing = [name for name in schema.get("required", []) if name not in value]
    if missing:
        raise ToolFailed(f"missing argument{'s' if len(missing) > 1 else ''}: {', '.join(missing)}")
    unknown = [name for name in value if name not in properties]
    if unknown and schema.get("additionalProperties") is False:
        raise ToolFailed(f"unknown argument {unknown[0]!r}; the arguments are: {', '.join(properties)}")
    for name, given in value.items():
        if name in properties:
            _check(name, given, properties[name])
    return value


def _check(name: str, value: Any, schema: dict[str, Any]) -> None:
    if value is None and not schema.get("nullable_ok", True):
        raise ToolFailed(f"{name} must not be null")
    if value is None:
        return  # an optional argument given as null is an argument not given
    kind = schema.get("type")
    if isinstance(kind, str) and kind in _TYPES and not _TYPES[kind](value):
        raise ToolFailed(f"{name} must be a {kind}, not {json.dumps(value)[:80]}")
    if "enum" in schema and value not in schema["enum"]:
        raise ToolFailed(f"{name} must be one of {', '.join(map(str, schema['enum']))}, not {json.dumps(value)[:80]}")
    if "minimum" in schema and value < schema["minimum"]:
        raise ToolFailed(f"{name} must be at least {schema['minimum']}")
    if "maximum" in schema and value > schema["maximum"]:
        raise ToolFailed(f"{name} must be at most {schema['maximum']}")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        raise ToolFailed(f"{name} is {len(value):,} characters; the most is {schema['maxLength']:,}")
