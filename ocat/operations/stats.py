"""The stats operation: each selected store's location and counts, and the stores that exist;
and their words, one rendering for the text faces.

`--vector-store-stats`, `/vstats` and MCP's `memory_stats` report what `stats` returns; the CLI's
text and `/vstats` show it through `stats_rows` and `stats_legend`, so both say the same.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Callable, Sequence

from ocat.records import StoreStats
from ocat import memory
from ocat.config.locations import user_config_file

if TYPE_CHECKING:
    from ocat.config.loading import Settings
    from ocat.memory import MemoryStore


@dataclass(frozen=True)
class StatsResult:
    """The selected stores' stats, and the names of every store beside them."""

    selected: list[StoreStats]
    available: list[str]


def stats(stores: Sequence[MemoryStore], settings: Settings) -> StatsResult:
    """Location, counts and model of each store in `stores` (the first one's neighbours listed)."""
    selected = [memory.store_stats(s, settings) for s in stores]
    return StatsResult(selected=selected, available=memory.store_names(settings, stores[0]))


NOT_MEASURED = "not measured yet"
NOT_DOWNLOADED = "not downloaded yet"


def stats_rows(one: StoreStats, show_path: Callable[[str], str] = str) -> list[tuple[str, str]]:
    """One store's stats as (key, value) in words: the keys of the JSON form, a value that is not
    known yet said so (`floor: not measured yet`, not `None`). `show_path` renders paths (the
    chat shows `~/...`)."""
    rows = []
    for key, value in asdict(one).items():
        if key == "floor" and value is None:
            shown = NOT_MEASURED
        elif key == "model_path":
            shown = show_path(value) if value else NOT_DOWNLOADED
        elif key == "path":
            shown = show_path(value)
        else:
            shown = str(value)
        rows.append((key, shown))
    return rows


def config_row(settings: Settings, show_path: Callable[[str], str] = str) -> tuple[str, str]:
    """("config", the user file read), or where one would be read from when there is none."""
    if settings.config_path:
        return "config", show_path(settings.config_path)
    return "config", f"none (the shipped defaults; yours would be {show_path(str(user_config_file()))})"


def stats_legend() -> str:
    """What `documents`, `floor` and `floor_raise` mean, said under every text stats."""
    return (
        "documents: files and notes, stored as document_chunks. floor: how strongly everyday, generic "
        "questions match this store's exchanges (the median of their best raw match; measured on the first "
        f"search once the store holds {memory.MIN_EXCHANGES} exchanges, and again as it grows). floor_raise: how much "
        "more, on that raw scale, an exchange must match to be given to the model because of the floor (0.0: none)."
    )
