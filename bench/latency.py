"""Latency of the chat's own retrieval (query embedding + hybrid search + gate) on a large store.

Builds a store of N exchanges from the dev conversations (repeated under new thread ids
until N is reached), then times `retrieve` with the chat's limits over the dev questions,
and the same searches with an explicit filter (a Chroma `where`, as `--where` runs them).

    python bench/latency.py --exchanges 10000
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    """Build the store, time the queries, print p50/p95/mean."""
    sys.path.insert(0, str(REPO))
    from bench.recall import DEFAULT_DATA, DEFAULT_MODEL, load_conversations
    from ocat.config import load_settings
    from ocat.memory import MemoryStore, RetrievalLimits, StoreLocation, retrieve
    from ocat.memory.embeddings import OnnxMiniLMEmbedder
    from ocat.memory.filters import parse_where
    from ocat.memory.search import search_store

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exchanges", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--store", type=Path, help="keep the store here and reuse it on the next run")
    args = parser.parse_args(argv)

    conversations = load_conversations(args.data)
    base = [e for c in conversations for e in c.exchanges]
    questions = [q["question"] for c in conversations for q in c.questions][: args.queries]
    embedder = OnnxMiniLMEmbedder(args.model)
    limits = RetrievalLimits.from_settings(load_settings(env={}).vector_store)
    with tempfile.TemporaryDirectory(prefix="ocat-latency-") as scratch:
        folder = args.store or Path(scratch)
        store = MemoryStore.open(StoreLocation(path=Path(folder)), embedder, name="bench")
        started = time.perf_counter()
        copies = (
            replace(e, exchange_id=f"{e.exchange_id}-{n}", thread_id=f"{e.thread_id}-{n}", session_id=f"{e.session_id}-{n}")
            for n in range(args.exchanges // len(base) + 1)
            for e in base
        )
        # Adding is idempotent: a kept store only gets what it is missing.
        store.add_exchanges(e for _, e in zip(range(args.exchanges), copies))
        if store.count("exchange") != args.exchanges:
            print(f"latency: the store at {folder} holds {store.count('exchange')} exchanges, not {args.exchanges}")
            return 1
        build = time.perf_counter() - started
        retrieve(store, questions[0], limits)  # warm the model and caches
        times = []
        for question in questions:
            t0 = time.perf_counter()
            retrieve(store, question, limits)
            times.append((time.perf_counter() - t0) * 1000)
        # Explicit filtered searches (--where, MCP filters) use a Chroma `where`: one selective
        # filter (a single thread) and one broad one (the later half of the store by date).
        stamps = sorted(e.timestamp for e in base)
        thread = base[len(base) // 2].thread_id + "-0"
        filtered = {
            f"thread_id={thread}": parse_where([f"thread_id={thread}"]),
            "date>=median": parse_where([f"timestamp>={stamps[len(stamps) // 2]}"]),
        }
        filtered_times = {}
        for name, filters in filtered.items():
            search_store(store, questions[0], limits, filters)
            runs = []
            for question in questions:
                t0 = time.perf_counter()
                search_store(store, question, limits, filters)
                runs.append((time.perf_counter() - t0) * 1000)
            filtered_times[name] = sorted(runs)
    print(f"store: {args.exchanges} exchanges, built in {build:.1f} s")
    for name, runs in [("retrieve (the chat's, no filter)", sorted(times))] + [
        (f"filtered search {name}", runs) for name, runs in filtered_times.items()
    ]:
        print(
            f"{name} over {len(runs)} queries: p50 {runs[len(runs) // 2]:.2f} ms, "
            f"p95 {runs[int(0.95 * (len(runs) - 1))]:.2f} ms, mean {statistics.fmean(runs):.2f} ms"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
