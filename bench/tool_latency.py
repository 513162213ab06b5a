"""ocat's own time in a tool round trip: a search_memory call, apart from the search itself.

Issue 30's goal: apart from the search, a tool round trip costs at most 50 ms of ocat's own time
(p50, on a store of 10k exchanges). On a store built as bench/latency.py builds it (`--vectors
synthetic` by default here), each dev question goes through what `ocat.chat.turn.Turn` does from the
moment the model's streamed answer asks for a search to the moment the next model call is ready:

1. **assemble**: the call put together from its streamed deltas (`CallAssembler`, the arguments
   in pieces of 8 characters, OpenAI's shape);
2. **run**: `ToolBox.run` in a worker thread (`asyncio.to_thread`, as the turn runs it):
   arguments parsed and checked, the search, thread titles, short ids, the entries formatted and
   the result bounded to `tools.result_tokens`;
3. **messages**: the assistant message with the call, the tool message, the tools offered again
   (`schemas`) and the next call's arguments (`ocat.llm._call_args`).

The search (`ocat.operations.search.search`: embedding the query, the hybrid retrieval, the
gate) is timed inside the run and taken out: `own = round trip - search`. Every question is asked
twice: as it is, and with a date range (`after`/`before`, a filtered search). Making the turn's
tools (`memory_tools`, `ToolBox`, once per turn, before the first model call) is timed apart.

    python bench/tool_latency.py --exchanges 10000 --store /tmp/ocat-tool-bench
    python bench/tool_latency.py --exchanges 10000 --store /tmp/ocat-tool-bench --served   # through the owner's server
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Iterator

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import smoke  # noqa: E402
from bench.latency import DEFAULT_DATA, DEFAULT_MODEL, _load, build_store, load_conversations, percentile  # noqa: E402

# Characters per streamed piece of a call's arguments (providers send a few tokens at a time).
PIECE = 8
# The date range of the dated searches (the dev conversations span 2022-2024).
AFTER, BEFORE = "2023-01-01", "2023-07-01"


def deltas(call_id: str, arguments: str) -> Iterator[list[dict[str, Any]]]:
    """A call as a provider streams it: id and name first, then the arguments in pieces."""
    yield [{"index": 0, "id": call_id, "type": "function", "function": {"name": "search_memory", "arguments": ""}}]
    for start in range(0, len(arguments), PIECE):
        yield [{"index": 0, "function": {"arguments": arguments[start : start + PIECE]}}]


class Timers:
    """Seconds spent in named parts, summed until `reset`: the search (`ocat.operations.search.search`,
    what search_memory calls) and, for the breakdown, the thread titles, the short ids and the
    token counts of a result, while installed."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._undo: list[Any] = []

    def reset(self) -> None:
        """Start counting again."""
        self.seconds = dict.fromkeys(self.seconds, 0.0)

    def timed(self, name: str, function: Any) -> Any:
        """`function`, its time added to `name`."""
        self.seconds.setdefault(name, 0.0)

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - started

        return timed

    def __enter__(self) -> Timers:
        import ocat.operations.search as searching
        import ocat.tools.memory_tools as tools

        for module, attribute, name in ((searching, "search", "search"), (tools, "_thread_titles", "titles")):
            original = getattr(module, attribute)
            setattr(module, attribute, self.timed(name, original))
            self._undo.append((module, attribute, original))
        return self

    def __exit__(self, *exc: Any) -> None:
        for module, attribute, original in self._undo:
            setattr(module, attribute, original)


async def round_trip(box: Any, settings: Any, question: str, dated: bool, timer: Timers) -> dict[str, float]:
    """One round trip as the turn makes it; milliseconds per part, the search taken out of `run`."""
    from ocat.llm import _call_args
    from ocat.llm.call_assembler import CallAssembler
    from ocat.tools import ToolCall

    arguments = json.dumps({"query": question, **({"after": AFTER, "before": BEFORE} if dated else {})})
    messages: list[dict[str, Any]] = [{"role": "system", "content": "..."}, {"role": "user", "content": question}]
    timer.reset()
    t0 = time.perf_counter()
    assembler = CallAssembler()
    for piece in deltas("call_0", arguments):
        assembler.feed(piece)
    calls = [ToolCall(asked.id, asked.name, asked.arguments) for asked in assembler.calls()]
    messages.append({"role": "assistant", "content": None, "tool_calls": [c.request_message() for c in calls]})
    t1 = time.perf_counter()
    for call in calls:
        call.start()
        await asyncio.to_thread(timer.timed("run", box.run), call)
        if call.error is not None:
            raise RuntimeError(f"search_memory failed: {call.error}")
        messages.append(call.result_message())
    t2 = time.perf_counter()
    _call_args(messages, settings.llm, box.schemas())
    t3 = time.perf_counter()
    took = timer.seconds
    search = took["search"]
    parts = {"titles": took["titles"], "short ids": took["short ids"], "token counts": took["token counts"]}
    return {
        "assemble": (t1 - t0) * 1000,
        "run without search": (t2 - t1 - search) * 1000,
        **{name: seconds * 1000 for name, seconds in parts.items()},
        "rest of run": (took["run"] - search - sum(parts.values())) * 1000,
        "thread hop": (t2 - t1 - took["run"]) * 1000,
        "messages": (t3 - t2) * 1000,
        "own": (t3 - t0 - search) * 1000,
        "search": search * 1000,
        "round trip": (t3 - t0) * 1000,
    }


def measure(folder: Path, embedder: Any, questions: list[str], *, served: bool) -> dict[str, Any]:
    """Open the store (embedded, or through its own server) and time every question's round trips."""
    from ocat.config.loading import load_settings
    from ocat.memory import MemoryStore
    from ocat.memory.sharing.owner_lock import acquire
    from ocat.operations.lookup import short_id
    from ocat.text.tokens import count_tokens
    from ocat.tools import ToolBox
    import ocat.tools.memory_tools
    from ocat.tools.memory_tools import MemoryToolContext, memory_tools

    settings = load_settings(env={})
    with ExitStack() as stack:
        lease = acquire(folder, serve=served)
        stack.callback(lease.release)
        store = MemoryStore.open(lease.location, embedder, name="bench")
        stack.callback(store.close)

        timer = Timers()
        # The tools show short ids with operations.lookup.short_id: timed where they call it.
        stack.callback(setattr, ocat.tools.memory_tools, "short_id", short_id)
        ocat.tools.memory_tools.short_id = timer.timed("short ids", short_id)
        count = timer.timed("token counts", count_tokens)

        def toolbox() -> Any:
            context = MemoryToolContext(store, settings)
            return ToolBox(memory_tools(context), result_tokens=settings.tools.result_tokens, count=count)

        async def run_all() -> dict[str, Any]:
            made: list[float] = []
            rows: dict[str, list[dict[str, float]]] = {"plain": [], "dated": []}
            with timer:
                for question in questions[:5]:  # warm the model, the caches, the tokenizer
                    await round_trip(toolbox(), settings, question, False, timer)
                for question in questions:
                    started = time.perf_counter()
                    box = toolbox()
                    made.append((time.perf_counter() - started) * 1000)
                    for kind in ("plain", "dated"):
                        rows[kind].append(await round_trip(box, settings, question, kind == "dated", timer))
            result: dict[str, Any] = {"toolbox per turn": _stats(made)}
            for kind, timed in (*rows.items(), ("both", rows["plain"] + rows["dated"])):  # "both": ocat's own time
                result[kind] = {part: _stats([r[part] for r in timed]) for part in timed[0]}
            return result

        return asyncio.run(run_all())


def _stats(values: list[float]) -> dict[str, float]:
    return {"p50": round(percentile(values, 0.5), 2), "p90": round(percentile(values, 0.9), 2)}


def main(argv: list[str] | None = None) -> int:
    """Build (or reuse) the store, time the round trips, print p50/p90 per part."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exchanges", type=int, default=10_000, help="store size (default 10000)")
    parser.add_argument("--vectors", choices=("real", "synthetic"), default="synthetic")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--store", type=Path, help="keep the store under this folder and reuse it on the next run")
    parser.add_argument("--served", action="store_true", help="also time through the owner's server, as the chat does")
    parser.add_argument("--goal-ms", type=float, default=50.0, help="the p50 goal for ocat's own time")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    smoke.add_flag(parser)
    args = parser.parse_args(argv)
    smoke.start(args.smoke)
    from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder

    conversations = load_conversations(args.data)
    base = [e for c in conversations for e in c.exchanges]
    questions = [q["question"] for c in conversations for q in c.questions][: args.queries]
    embedder = OnnxMiniLMEmbedder(args.model, threads=smoke.threads())
    report: dict[str, Any] = {"exchanges": args.exchanges, "vectors": args.vectors, "queries": len(questions),
                              "loadavg_start": _load()}
    with tempfile.TemporaryDirectory(prefix="ocat-tool-latency-") as scratch:
        root = args.store or Path(scratch)
        root.mkdir(parents=True, exist_ok=True)
        folder = root / f"{args.vectors}-{args.exchanges}"
        report["build_s"] = round(build_store(folder, args.exchanges, args.vectors, base, embedder), 1)
        for mode in ("embedded", "served") if args.served else ("embedded",):
            report[mode] = measure(folder, embedder, questions, served=mode == "served")
            report[mode]["within goal"] = report[mode]["both"]["own"]["p50"] <= args.goal_ms
    report["loadavg_end"] = _load()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"store: {args.exchanges} exchanges ({args.vectors} vectors), {len(questions)} questions, "
          f"each plain and dated; load average {report['loadavg_start']} -> {report['loadavg_end']}")
    for mode in ("embedded", "served"):
        if mode not in report:
            continue
        got = report[mode]
        made = got["toolbox per turn"]
        print(f"{mode}: the turn's tools made (once per turn) p50 {made['p50']} ms, p90 {made['p90']} ms")
        for kind in ("plain", "dated", "both"):
            print(f"  {kind}: " + ", ".join(f"{part} {s['p50']} / {s['p90']}" for part, s in got[kind].items())
                  + "  (ms, p50 / p90)")
        verdict = "within" if got["within goal"] else "over"
        print(f"  ocat's own time p50 {got['both']['own']['p50']} ms: {verdict} the {args.goal_ms:g} ms goal")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
