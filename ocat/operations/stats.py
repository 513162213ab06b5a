"""The stats operation: each selected store's location and counts, and the stores that exist.

`--vector-store-stats`, `/vstats` and MCP's `memory_stats` report what this returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from ocat.records import StoreStats

if TYPE_CHECKING:
    from ocat.config import Settings
    from ocat.memory.storage.store import MemoryStore


@dataclass(frozen=True)
class StatsResult:
    """The selected stores' stats, and the names of every store beside them."""

    selected: list[StoreStats]
    available: list[str]


def stats(stores: Sequence[MemoryStore], settings: Settings) -> StatsResult:
    """Location, counts and model of each store in `stores` (the first one's neighbours listed)."""
    from ocat.memory import store_stats
    from ocat.memory.named_stores import store_names

    return StatsResult(selected=[store_stats(s, settings) for s in stores], available=store_names(settings, stores[0]))
