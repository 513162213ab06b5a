"""What linking versions costs a write: the same exchanges written with and without
`memory.link_versions`, in batches of 256 as an import writes them, and the share of the write
spent finding and storing links (docs/PERFORMANCE.md, "Linking versions").

    python bench/link_cost.py

The exchanges are chats-dev's, changing-dev's and locomo-dev's (../shared/eval), oldest first,
embedded with the real model; passages are left to the background, as after an import.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import smoke  # noqa: E402
from recall import DEFAULT_DATA, DEFAULT_MODEL, load_conversations  # noqa: E402
from recall_chats import load_chats  # noqa: E402

EVAL = REPO.parent / "shared" / "eval"


def main(argv: list[str] | None = None) -> int:
    """Write the exchanges twice (linking on, then off) and print each write's time and the linking's share."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    smoke.add_flag(parser)
    smoke.start(parser.parse_args(argv).smoke)
    from ocat.memory import MemoryStore, StoreLocation
    from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder
    from ocat.memory.storage import version_finder as finder
    from ocat.memory.storage import writes

    embedder = OnnxMiniLMEmbedder(DEFAULT_MODEL, threads=smoke.threads())
    exchanges: list[Any] = []
    for name in ("chats-dev", "changing-dev"):
        exchanges += load_chats(EVAL / name)[0]
    for conversation in load_conversations(DEFAULT_DATA):
        exchanges += conversation.exchanges
    exchanges = smoke.first(sorted(exchanges, key=lambda e: e.timestamp), 40)
    spent = [0.0]

    def timed(*args: Any, **kwargs: Any) -> int:
        started = time.perf_counter()
        try:
            return finder.link_versions(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - started

    writes.link_versions = timed  # type: ignore[assignment]
    for linking in (True, False):
        with tempfile.TemporaryDirectory(prefix="ocat-link-cost-") as folder:
            store = MemoryStore.open(StoreLocation(path=Path(folder) / "s"), embedder, name="cost")
            store.link_versions = linking
            spent[0] = 0.0
            started = time.perf_counter()
            for start in range(0, len(exchanges), 256):
                store.add_exchanges(exchanges[start : start + 256])
            total = time.perf_counter() - started
            linked = sum(1 for _, m in store.iter_metadata("exchange") if m.get("updated_by"))
            print(f"link_versions={linking}: {len(exchanges)} exchanges written in {total:.1f} s; linking "
                  f"{spent[0]:.2f} s ({100 * spent[0] / total:.1f}%); {linked} linked")
            store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
