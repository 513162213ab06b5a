"""Latency of the chat's own retrieval (query embedding + hybrid search + gate) as the store grows.

For each size N, a store of N exchanges is built from the dev conversations, then the dev
questions are timed through `retrieve_any` with the chat's limits, two ways:

- "one search": the first turn of a chat, `--query-vector-store` and `--ask` (one query);
- "chat turn": a turn with history, as `ChatSession.recall` runs it (the new prompt, and
  the previous prompts plus the new one: two queries, best score per memory).

Each is timed on the embedded client (what one-shot commands use) and, with `--served`,
through the owner's Chroma server on loopback (what the full-screen chat uses). Every query
is embedded by the real model; `--breakdown` adds where the time goes.

Stores: `--vectors real` (default) embeds every stored exchange with the real model (about
30 exchanges/s on a loaded 2-core machine: 100k takes about an hour). `--vectors synthetic`
builds large stores in minutes: exchange k pairs the prompt of one dev exchange with the
response of another (so texts differ and the lexical index has realistic term statistics)
and its vector is the normalised sum of the real vectors of the two halves. The latency it
measures is the search's, on a store of that size; the queries are real.

    python bench/latency.py --exchanges 10000
    python bench/latency.py --exchanges 1000 10000 100000 --vectors synthetic --store /tmp/ocat-bench --served
    python bench/latency.py ... --checkout /tmp/ocat-before   # the same for another source tree (git archive)
    python bench/latency.py --exchanges 10000 --vectors synthetic --dated   # questions that name a time

`--dated` times only the dev questions that name a time ("in May 2023", "last year"), asked the
day after the dev conversations' last session, with the time read (what ships) and not read.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import smoke  # noqa: E402
from bench.recall import DEFAULT_DATA, DEFAULT_MODEL, load_conversations  # noqa: E402

# Response k of a synthetic copy n comes from dev exchange (k + n * STRIDE) mod len(base):
# a stride coprime with the base size keeps every (prompt, response) pair distinct.
STRIDE = 7


class HalvesEmbedder:
    """The real model's name and size, but each stored text's vector is the normalised sum of
    the real vectors of its two halves, and a prompt's is its own real vector (store building
    only; queries use the real model)."""

    def __init__(self, halves: Any, rows: dict[str, tuple[int, int]], name: str, dimensions: int) -> None:
        self.halves = halves
        self.rows = rows
        self.responses: dict[str, str] = {}
        self.name = name
        self.dimensions = dimensions

    def passages(self, text: str) -> list[str]:
        """One passage per stored exchange (its response), as if every answer were longer than the
        model's window: the most a chat turn's read of passage vectors costs per candidate."""
        response = self.responses.get(text)
        return [response] if response is not None else []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """The synthetic vector of each text (a KeyError means the bench built it wrong)."""
        import numpy as np

        # A prompt alone (the prompt side of an exchange) is one half: twice the same half.
        pairs = np.asarray([self.rows[t] for t in texts])
        sums = self.halves[pairs[:, 0]] + self.halves[pairs[:, 1]]
        return (sums / np.linalg.norm(sums, axis=1, keepdims=True)).tolist()


def percentile(values: Sequence[float], share: float) -> float:
    """The nearest-rank percentile of a list of numbers."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered) + 0.5) - 1))]


def summary(values: Sequence[float]) -> dict[str, float]:
    """p50, p95 and mean, in the unit given."""
    return {
        "p50": round(percentile(values, 0.50), 2),
        "p95": round(percentile(values, 0.95), 2),
        "mean": round(statistics.fmean(values), 2),
    }


def synthetic_exchanges(base: list[Any], count: int) -> Iterator[Any]:
    """`count` distinct exchanges: copy n of dev exchange k takes its response from another exchange."""
    n = 0
    made = 0
    while made < count:
        for k, e in enumerate(base):
            if made == count:
                return
            other = base[(k + n * STRIDE) % len(base)]
            yield replace(
                e,
                exchange_id=f"{e.exchange_id}-{n}",
                thread_id=f"{e.thread_id}-{n}",
                session_id=f"{e.session_id}-{n}",
                assistant_response=other.assistant_response,
            )
            made += 1
        n += 1


def synthetic_embedder(base: list[Any], count: int, embedder: Any, cache: Path | None) -> HalvesEmbedder:
    """An embedder for the synthetic exchanges, from the real vectors of every dev prompt and response."""
    import numpy as np

    halves = sorted({e.user_prompt for e in base} | {e.assistant_response for e in base})
    vectors = None
    if cache is not None and cache.exists():
        saved = json.loads(cache.read_text())
        if saved["texts"] == halves:
            vectors = np.asarray(saved["vectors"], dtype=np.float32)
    if vectors is None:
        vectors = np.asarray(embedder.embed(halves), dtype=np.float32)
        if cache is not None:
            cache.write_text(json.dumps({"texts": halves, "vectors": vectors.tolist()}))
    row = {text: i for i, text in enumerate(halves)}
    rows = {e.text: (row[e.user_prompt], row[e.assistant_response]) for e in synthetic_exchanges(base, count)}
    rows.update((e.user_prompt, (row[e.user_prompt], row[e.user_prompt])) for e in base)
    rows.update((e.assistant_response, (row[e.assistant_response], row[e.assistant_response])) for e in base)
    built = HalvesEmbedder(vectors, rows, embedder.name, embedder.dimensions)
    built.responses = {e.text: e.assistant_response for e in synthetic_exchanges(base, count)}
    return built


def build_store(folder: Path, size: int, vectors: str, base: list[Any], embedder: Any) -> float:
    """Fill the store at `folder` to `size` exchanges (adding only what is missing); seconds taken."""
    from ocat.memory import MemoryStore, StoreLocation

    started = time.perf_counter()
    if vectors == "synthetic":
        builder: Any = synthetic_embedder(base, size, embedder, folder.parent / "dev-halves.json")
        exchanges = synthetic_exchanges(base, size)
    else:
        builder = embedder
        copies = (
            replace(e, exchange_id=f"{e.exchange_id}-{n}", thread_id=f"{e.thread_id}-{n}", session_id=f"{e.session_id}-{n}")
            for n in range(size // len(base) + 1)
            for e in base
        )
        exchanges = (e for _, e in zip(range(size), copies))
    store = MemoryStore.open(StoreLocation(path=folder), builder, name="bench")
    if store.count("exchange") != size:
        store.add_exchanges(exchanges)  # idempotent: a kept store only gets what it is missing
    held = store.count("exchange")
    store.close()
    if held != size:
        raise SystemExit(f"latency: the store at {folder} holds {held} exchanges, not {size}")
    return time.perf_counter() - started


class Breakdown:
    """Wraps the store's parts with timers, to say where a retrieval's time goes."""

    # Parts of more than one version of ocat, so one bench measures before and after a change.
    PARTS = (
        ("embed query", "embedder", "embed"),
        ("dense search (chroma query)", None, "search"),
        ("dense search, ids only (chroma query)", None, "nearest"),
        ("read by id (chroma get)", None, "fetch"),
        ("prompt side (chroma get)", "prompts", "similarities"),
        ("lexical search (fts5)", "lexical", "search"),
        ("doc freqs", "lexical", "doc_freqs"),
        ("term sets (sqlite)", "lexical", "term_sets"),
        ("neighbours (sqlite)", "lexical", "neighbours"),
        ("lexical count", "lexical", "count"),
    )

    def __init__(self, store: Any) -> None:
        self.totals = {label: 0.0 for label, _, _ in self.PARTS}
        self._undo: list[Callable[[], None]] = []
        for label, attr, method in self.PARTS:
            owner = getattr(store, attr, None) if attr else store
            if owner is not None and hasattr(owner, method):
                self._wrap(owner, method, label)

    def _wrap(self, owner: Any, method: str, label: str) -> None:
        original = getattr(owner, method)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.totals[label] += time.perf_counter() - t0

        setattr(owner, method, timed)
        self._undo.append(lambda: delattr(owner, method))

    def restore(self) -> None:
        """Put the store's methods back."""
        for undo in self._undo:
            undo()


def time_queries(store: Any, questions: list[str], limits: Any, *, chat: bool, now: Any = None) -> list[float]:
    """Milliseconds per retrieval: one search per question, or a chat turn after the previous question."""
    from ocat.memory.retrieval.retrieve import retrieve_any

    times = []
    for n, question in enumerate(questions):
        # As ocat.chat.messages.retrieval_queries builds them once a conversation has history.
        queries = [question, f"{questions[n - 1]}\n{question}"] if chat else [question]
        t0 = time.perf_counter()
        retrieve_any(store, queries, limits, now=now)
        times.append((time.perf_counter() - t0) * 1000)
    return times


def profile_chat_turns(folder: Path, embedder: Any, questions: list[str]) -> str:
    """A pyinstrument profile (text) of chat-turn retrievals on the embedded store (`pip install pyinstrument`)."""
    from pyinstrument import Profiler

    from ocat.config.loading import load_settings
    from ocat.memory import MemoryStore, RetrievalLimits, StoreLocation

    limits = RetrievalLimits.from_settings(load_settings(env={}).vector_store)
    store = MemoryStore.open(StoreLocation(path=folder), embedder, name="bench")
    time_queries(store, questions[:5], limits, chat=False)
    profiler = Profiler(interval=0.0005)
    profiler.start()
    time_queries(store, questions, limits, chat=True)
    profiler.stop()
    store.close()
    return str(profiler.output_text(unicode=False, color=False))


def measure(folder: Path, embedder: Any, questions: list[str], *, served: bool, breakdown: bool) -> dict[str, Any]:
    """Open the store (embedded, or through its own server) and time both kinds of retrieval."""
    from ocat.config.loading import load_settings
    from ocat.memory import MemoryStore, RetrievalLimits
    from ocat.memory.sharing.owner_lock import acquire

    limits = RetrievalLimits.from_settings(load_settings(env={}).vector_store)
    with ExitStack() as stack:
        lease = acquire(folder, serve=served)
        stack.callback(lease.release)
        store = MemoryStore.open(lease.location, embedder, name="bench")
        for q in questions[:5]:
            time_queries(store, [q], limits, chat=False)  # warm the model, caches and connection
        result: dict[str, Any] = {}
        for label, chat in (("one search", False), ("chat turn", True)):
            timer = Breakdown(store) if breakdown else None
            times = time_queries(store, questions, limits, chat=chat)
            result[label] = summary(times)
            if timer is not None:
                timer.restore()
                result[label]["breakdown_ms_per_retrieval"] = {
                    k: round(v * 1000 / len(questions), 2) for k, v in timer.totals.items() if v
                }
    return result


def measure_dated(folder: Path, embedder: Any, questions: list[str], now: Any) -> dict[str, Any]:
    """Questions that name a time, one search each (embedded), with the time read and not."""
    from ocat.config.loading import load_settings
    from ocat.memory import MemoryStore, RetrievalLimits, StoreLocation

    limits = RetrievalLimits.from_settings(load_settings(env={}).vector_store)
    store = MemoryStore.open(StoreLocation(path=folder), embedder, name="bench")
    try:
        time_queries(store, questions[:5], limits, chat=False, now=now)  # warm the model and caches
        return {
            "time read": summary(time_queries(store, questions, limits, chat=False, now=now)),
            "time not read": summary(time_queries(store, questions, replace(limits, time_policy="off"), chat=False,
                                                  now=now)),
        }
    finally:
        store.close()


def measure_backfill(folder: Path, embedder: Any, questions: list[str], gap: float) -> dict[str, Any]:
    """Chat turns while the passage backfill runs (every exchange's passages marked to be made
    again, as after a big import), `gap` seconds apart as a chat's turns come; then the same turns
    with the backfill stopped. Embedded, as the chat that owns the store searches."""
    from ocat.config.loading import load_settings
    from ocat.memory import MemoryStore, RetrievalLimits, StoreLocation

    limits = RetrievalLimits.from_settings(load_settings(env={}).vector_store)
    store = MemoryStore.open(StoreLocation(path=folder), embedder, name="bench")
    try:
        time_queries(store, questions[:5], limits, chat=False)  # warm the model and caches
        store.prompts.delete_passages()
        waiting = len(store.prompts.without_passages(10**7))
        store.start_backfill()
        during = _turns_apart(store, questions, limits, gap)
        made = waiting - len(store.prompts.without_passages(10**7))
        running = store.backfill is not None and store.backfill.thread.is_alive()
        if store.backfill is not None:
            store.backfill.stop()
        after = _turns_apart(store, questions, limits, gap)
        return {"chat turn during the backfill": summary(during), "chat turn after it": summary(after),
                "passages made meanwhile": made, "of": waiting, "backfill still running": running}
    finally:
        store.close()


def _turns_apart(store: Any, questions: list[str], limits: Any, gap: float) -> list[float]:
    """Milliseconds per chat turn's retrieval (the question after the one before), `gap` s apart."""
    from ocat.memory.retrieval.retrieve import retrieve_any

    times = []
    for n, question in enumerate(questions):
        time.sleep(gap)
        t0 = time.perf_counter()
        retrieve_any(store, [question, f"{questions[n - 1]}\n{question}"] if n else [question], limits)
        times.append((time.perf_counter() - t0) * 1000)
    return times


def main(argv: list[str] | None = None) -> int:
    """Build (or reuse) a store per size, time the queries, print p50/p95/mean and the growth."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exchanges", type=int, nargs="+", default=[10_000], help="store sizes (default 10000)")
    parser.add_argument("--vectors", choices=("real", "synthetic"), default="real", help="how stored exchanges get vectors")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--store", type=Path, help="keep the stores under this folder and reuse them on the next run")
    parser.add_argument("--served", action="store_true", help="also time through the owner's server, as the chat does")
    parser.add_argument("--breakdown", action="store_true", help="also say where the time goes")
    parser.add_argument("--profile", action="store_true", help="also profile chat turns on the last store (needs pyinstrument)")
    parser.add_argument("--checkout", type=Path, help="time ocat from this source tree (e.g. an older commit, for before/after)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--dated", action="store_true", help="time only the questions that name a time, read and not")
    parser.add_argument("--during-backfill", action="store_true",
                        help="time chat turns while the passage backfill runs, and after it (--gap apart)")
    parser.add_argument("--gap", type=float, default=1.0, help="with --during-backfill: seconds between turns")
    smoke.add_flag(parser)
    args = parser.parse_args(argv)
    smoke.start(args.smoke)
    if args.checkout:
        sys.path.insert(0, str(args.checkout.resolve()))  # before anything imports ocat
    import ocat
    from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder

    conversations = load_conversations(args.data)
    base = [e for c in conversations for e in c.exchanges]
    questions = [q["question"] for c in conversations for q in c.questions][: args.queries]
    now = None
    if args.dated:
        from datetime import datetime, timedelta

        from ocat.memory.retrieval.time_range import time_range

        last = datetime.fromtimestamp(max(e.timestamp for e in base))
        now = last.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
        questions = [q["question"] for c in conversations for q in c.questions if time_range(q["question"], now)]
    embedder = OnnxMiniLMEmbedder(args.model, threads=smoke.threads())
    report: dict[str, Any] = {
        "ocat": str(Path(ocat.__file__).parent.parent),
        "vectors": args.vectors,
        "queries": len(questions),
        "loadavg_start": _load(),
        "sizes": {},
    }
    with tempfile.TemporaryDirectory(prefix="ocat-latency-") as scratch:
        root = args.store or Path(scratch)
        root.mkdir(parents=True, exist_ok=True)
        for size in args.exchanges:
            folder = root / f"{args.vectors}-{size}"
            build = build_store(folder, size, args.vectors, base, embedder)
            entry: dict[str, Any] = {"build_s": round(build, 1)}
            if args.during_backfill:
                entry["backfill"] = measure_backfill(folder, embedder, questions, args.gap)
                report["sizes"][size] = entry
                if not args.json:
                    for label, row in entry["backfill"].items():
                        print(f"{size} exchanges, {label}: {row}")
                continue
            if args.dated:
                entry["dated"] = measure_dated(folder, embedder, questions, now)
                report["sizes"][size] = entry
                if not args.json:
                    for label, row in entry["dated"].items():
                        print(f"{size} exchanges, {len(questions)} questions that name a time, {label}: {row}")
                continue
            for mode in ("embedded", "served") if args.served else ("embedded",):
                entry[mode] = measure(folder, embedder, questions, served=mode == "served", breakdown=args.breakdown)
            report["sizes"][size] = entry
            if not args.json:
                _print_size(size, entry, folder if args.store else None)
        if args.profile:
            report["profile"] = profile_chat_turns(root / f"{args.vectors}-{args.exchanges[-1]}", embedder, questions)
    sizes = sorted(report["sizes"])
    if len(sizes) > 1 and not args.dated and not args.during_backfill:
        first, last = report["sizes"][sizes[0]], report["sizes"][sizes[-1]]
        report["growth_p50"] = {
            f"{mode} {label}": round(last[mode][label]["p50"] / first[mode][label]["p50"], 2)
            for mode in ("embedded", "served")
            if mode in first
            for label in ("one search", "chat turn")
        }
        if not args.json:
            for name, ratio in report["growth_p50"].items():
                print(f"p50 at {sizes[-1]} / p50 at {sizes[0]}, {name}: {ratio}x")
    if args.profile and not args.json:
        print(report["profile"])
    report["loadavg_end"] = _load()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"ocat from {report['ocat']}; load average {report['loadavg_start']} -> {report['loadavg_end']}")
    return 0


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _print_size(size: int, entry: dict[str, Any], kept: Path | None) -> None:
    where = f" (kept in {kept})" if kept else ""
    print(f"store: {size} exchanges, ready in {entry['build_s']} s{where}")
    for mode in ("embedded", "served"):
        for label, stats in entry.get(mode, {}).items():
            print(f"  {mode:8} {label:10}: p50 {stats['p50']:.2f} ms, p95 {stats['p95']:.2f} ms, mean {stats['mean']:.2f} ms")
            for part, ms in stats.get("breakdown_ms_per_retrieval", {}).items():
                print(f"      {part:30} {ms:7.2f} ms")
    sys.stdout.flush()


if __name__ == "__main__":
    raise SystemExit(main())
