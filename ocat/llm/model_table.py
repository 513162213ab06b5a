"""What is known of a chat model (its input window, its prices, whether it calls tools), without importing litellm.

litellm keeps this in a JSON file inside its package; importing litellm to read it costs seconds
(issue 35: `--ask` took 7x simonw/llm's time, most of it that import). So the file is read
directly (it is found without importing the package), once per litellm version, and the few
fields ocat uses are kept in a small table in ocat's cache (`~/.cache/ocat/models-<version>.json`),
read in milliseconds afterwards. A model neither knows is unknown: callers have their fallbacks.
"""

from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ocat.config.locations import cache_dir

# The file litellm ships its model list in (a copy it falls back to offline, which ocat always asks for).
LITELLM_TABLE = "model_prices_and_context_window_backup.json"
# The fields ocat reads of each model.
FIELDS = ("max_input_tokens", "max_tokens", "input_cost_per_token", "output_cost_per_token",
          "supports_function_calling", "litellm_provider", "mode")


@dataclass(frozen=True)
class ModelFacts:
    """What litellm's table says of one model; None where it says nothing."""

    max_input_tokens: int | None = None
    input_cost_per_token: float | None = None
    output_cost_per_token: float | None = None
    supports_function_calling: bool | None = None
    provider: str | None = None


def model_facts(model: str) -> ModelFacts | None:
    """The facts of `model` (as written in ocat's config: `gpt-4o-mini`, `openai/gpt-4o`,
    `anthropic/claude-...`), or None when litellm's table does not know it."""
    table = _table()
    for key in _names(model):
        entry = table.get(key)
        if entry is not None:
            return _facts(entry)
    return None


def _names(model: str) -> list[str]:
    """The names a model may be listed under: as written, without its provider, with it."""
    names = [model]
    if "/" in model:
        names.append(model.split("/", 1)[1])
    return names


def _facts(entry: dict[str, Any]) -> ModelFacts:
    window = entry.get("max_input_tokens") or entry.get("max_tokens")
    return ModelFacts(
        max_input_tokens=int(window) if isinstance(window, (int, float)) and not isinstance(window, bool) else None,
        input_cost_per_token=_number(entry.get("input_cost_per_token")),
        output_cost_per_token=_number(entry.get("output_cost_per_token")),
        supports_function_calling=entry.get("supports_function_calling") if isinstance(
            entry.get("supports_function_calling"), bool) else None,
        provider=entry.get("litellm_provider") if isinstance(entry.get("litellm_provider"), str) else None,
    )


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@lru_cache(maxsize=1)
def _table() -> dict[str, dict[str, Any]]:
    """The trimmed table: from ocat's cache, else made from litellm's file (and cached); empty
    when litellm's file cannot be found or read (every model is then unknown)."""
    version = _litellm_version()
    cached = cache_dir() / "ocat" / f"models-{version}.json"
    try:
        data = json.loads(cached.read_text(encoding="utf-8"))
        if isinstance(data, dict):
            return data
    except (OSError, ValueError):
        pass
    table = _from_litellm()
    if table:
        _write(cached, table)
    return table


def _litellm_version() -> str:
    try:
        from importlib.metadata import version

        return version("litellm")
    except Exception:
        return "unknown"


def _from_litellm() -> dict[str, dict[str, Any]]:
    spec = importlib.util.find_spec("litellm")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = Path(list(spec.submodule_search_locations)[0]) / LITELLM_TABLE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        name: {key: entry[key] for key in FIELDS if key in entry}
        for name, entry in data.items()
        if isinstance(entry, dict) and entry.get("mode", "chat") in ("chat", "responses")
    }


def _write(path: Path, table: dict[str, dict[str, Any]]) -> None:
    """Keep the table for the next runs; a cache that cannot be written costs only the next 0.1 s."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(table, separators=(",", ":")), encoding="utf-8")
        os.replace(partial, path)
    except OSError:
        pass
