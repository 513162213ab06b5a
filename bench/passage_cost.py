"""What passage vectors cost when storing exchanges: chats-dev (long assistant answers) stored
with them and without them, each into a fresh store, and the raw model on the same texts.

A bulk write (this one: 211 exchanges) stores texts and prompts at once and makes passages in
a background thread; "stored" is when add_exchanges returns, "passages made" when that
thread is done too.

    python bench/passage_cost.py             # 3 runs each, medians
    python bench/passage_cost.py --runs 5

Prints exchanges/s stored with passages, without, the raw model's rate on texts + prompts
(what a store embedded before passages), the ratios, and how many passages were made.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import smoke  # noqa: E402
from recall import DEFAULT_MODEL  # noqa: E402
from recall_chats import DEFAULT_CHATS, load_chats  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Time the three ways and print the figures."""
    from ocat.memory import MemoryStore, StoreLocation
    from ocat.memory.embedding import embedders
    from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--chats", type=Path, default=DEFAULT_CHATS)
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    smoke.add_flag(parser)
    args = parser.parse_args(argv)
    smoke.start(args.smoke)
    exchanges = smoke.first(load_chats(args.chats)[0], 8)
    embedder = OnnxMiniLMEmbedder(args.model, threads=smoke.threads())
    embedder.embed(["warm up"])
    rates: dict[str, list[float]] = {
        "with passages": [], "with passages, passages made": [], "without": [], "without, passages made": [],
        "raw model": [],
    }
    made = 0
    real_passages = OnnxMiniLMEmbedder.passages
    for _ in range(args.runs):
        for label in ("with passages", "without"):
            if label == "without":
                OnnxMiniLMEmbedder.passages = lambda self, text: []  # type: ignore[method-assign]
            with tempfile.TemporaryDirectory() as tmp:
                store = MemoryStore.open(StoreLocation(path=Path(tmp)), embedder, name="bench")
                started = time.perf_counter()
                store.add_exchanges(exchanges)
                stored = len(exchanges) / (time.perf_counter() - started)
                store.wait_for_passages()  # a bulk write makes them in the background: count that too
                rates[f"{label}, passages made"].append(len(exchanges) / (time.perf_counter() - started))
                rates[label].append(stored)
                made = made or store.prompts.passage_count()
                store.close()
            OnnxMiniLMEmbedder.passages = real_passages  # type: ignore[method-assign]
        started = time.perf_counter()
        embedder.embed([e.text for e in exchanges] + [e.user_prompt for e in exchanges])
        rates["raw model"].append(len(exchanges) / (time.perf_counter() - started))
    medians = {label: statistics.median(values) for label, values in rates.items()}
    for label, rate in medians.items():
        print(f"{label:<30} {rate:6.1f} exchanges/s")
    print(f"stored with passages / raw model: {medians['with passages'] / medians['raw model']:.2f}x; "
          f"with their passages made / raw model: {medians['with passages, passages made'] / medians['raw model']:.2f}x; "
          f"{made} passages for {len(exchanges)} exchanges (max {embedders.MAX_PASSAGES} each)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
