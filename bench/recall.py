"""Retrieval evaluation through ocat's own retrieval: LoCoMo (two people talking) and chats-dev.

Protocol (../shared/eval/README.md): each session's turns are paired into exchanges, one
thread per session, one fresh store per conversation; questions of categories 1-4 are
queries. R@k is the share of a question's evidence turns covered by the top-k exchanges.
The gate is measured with the chat's own limits: "admitted" when an evidence exchange
passes the threshold, "quiet" when nothing passes for a question from another conversation.

chats-dev (one user's chats with an assistant) is measured by bench/recall_chats.py.

    python bench/recall.py                       # both data sets, every mode on LoCoMo
    python bench/recall.py --questions 20 --json # a quick slice, machine-readable
    python bench/recall.py --sets chats          # only chats-dev
    python bench/recall.py --folds               # cross-validated, mean and worst fold (bench/recall_folds.py)
    python bench/recall.py --time off            # without reading a time the question names (the "before")

Questions are asked "after" the history: LoCoMo's the day after the conversation's last session,
chats-dev's on 2025-07-01 (its README), so a question that names a time means what it would then.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Iterable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import recall_chats  # noqa: E402
import smoke  # noqa: E402
from recall_chats import DEFAULT_CHATS, bench_settings, evaluate_chats, format_chats, pct  # noqa: E402
DEFAULT_DATA = REPO.parent / "shared" / "eval" / "locomo-dev.json"
DEFAULT_MODEL = REPO.parent / "shared" / "models" / "all-MiniLM-L6-v2-int8"
KS = (1, 3, 5, 10)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
MODES = ("hybrid", "dense", "lexical")


@dataclass
class Conversation:
    """One conversation as exchanges (with the dia_ids each covers) and its questions."""

    sample_id: str
    exchanges: list[Any]
    dia_ids: dict[str, set[str]]
    questions: list[dict[str, Any]]


def normalise_evidence(evidence: Iterable[str]) -> set[str]:
    """Evidence ids as `D<n>:<t>`, repairing the malformed ones the data set has."""
    found: set[str] = set()
    for item in evidence:
        for match in re.finditer(r"D:?(\d+):(\d+)", str(item)):
            found.add(f"D{int(match.group(1))}:{int(match.group(2))}")
    return found


def parse_date(text: str) -> float:
    """A LoCoMo session date ("1:56 pm on 8 May, 2023") as a Unix time."""
    cleaned = re.sub(r"\s+", " ", text.strip())
    for fmt in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y"):
        try:
            return datetime.strptime(cleaned, fmt).timestamp()
        except ValueError:
            continue
    return 0.0


def load_conversations(path: Path) -> list[Conversation]:
    """The data set as exchanges per the protocol."""
    from ocat.records import Exchange

    data = json.loads(path.read_text(encoding="utf-8"))
    conversations = []
    for item in data:
        conv = item["conversation"]
        exchanges, dia_ids = [], {}
        sessions = sorted(
            (int(m.group(1)), key) for key in conv if (m := re.fullmatch(r"session_(\d+)", key))
        )
        kept = set(smoke.kept_sessions([number for number, _ in sessions]))
        sessions = [(number, key) for number, key in sessions if number in kept]
        for number, key in sessions:
            turns = conv[key]
            when = parse_date(conv.get(f"{key}_date_time", ""))
            thread = f"{item['sample_id']}-session-{number}"
            for index in range(0, len(turns), 2):
                pair = turns[index : index + 2]
                texts = [_turn_text(t) for t in pair]
                exchange = Exchange(
                    user_prompt=texts[0],
                    assistant_response=texts[1] if len(texts) > 1 else "",
                    thread_id=thread,
                    session_id=thread,
                    exchange_id=f"{item['sample_id']}-{pair[0]['dia_id']}",
                    timestamp=when + index,  # keeps turn order within a session
                )
                exchanges.append(exchange)
                dia_ids[exchange.exchange_id] = {t["dia_id"] for t in pair}
        questions = [q for q in item["qa"] if q.get("category") in CATEGORIES]
        covered = set().union(*dia_ids.values()) if dia_ids else set()
        questions = smoke.kept_questions(questions, covered, lambda q: normalise_evidence(q.get("evidence", ())))
        conversations.append(Conversation(item["sample_id"], exchanges, dia_ids, questions))
    return conversations


def locomo_now(conversation: Conversation) -> datetime:
    """When a conversation's questions are asked: the day after its last session (naive local
    time, as its sessions' dates were read), so that "last year" or "in May" mean what they
    would to someone asking then."""
    last = datetime.fromtimestamp(max(e.timestamp for e in conversation.exchanges))
    return last.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)


def _turn_text(turn: dict[str, Any]) -> str:
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" [shares an image: {turn['blip_caption']}]"
    return text


@dataclass
class ModeResult:
    """Sums for one retrieval mode, turned into rates by `row`."""

    recall: dict[int, list[float]] = field(default_factory=lambda: {k: [] for k in KS})
    by_category: dict[int, dict[int, list[float]]] = field(default_factory=dict)
    admitted: list[bool] = field(default_factory=list)
    quiet: list[bool] = field(default_factory=list)
    latency_ms: list[float] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        """Percentages and latencies for the table and for JSON."""
        ordered = sorted(self.latency_ms)
        return {
            "recall": {f"R@{k}": pct(v) for k, v in self.recall.items()},
            "by_category": {
                CATEGORIES[c]: {f"R@{k}": pct(v) for k, v in ks.items()} for c, ks in sorted(self.by_category.items())
            },
            "admitted": pct(self.admitted),
            "quiet": pct(self.quiet),
            "latency_mean_ms": round(statistics.fmean(ordered), 2) if ordered else None,
            "latency_p50_ms": round(ordered[len(ordered) // 2], 2) if ordered else None,
            "latency_p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 2) if ordered else None,
            "questions": len(self.recall[1]),
        }


def evaluate(
    conversations: list[Conversation],
    *,
    modes: Iterable[str] = MODES,
    questions: int | None = None,
    model_dir: Path = DEFAULT_MODEL,
    off_topic: int | None = None,
    context: int = 0,
    via_cli: bool = False,
) -> dict[str, dict[str, Any]]:
    """Run every mode over every conversation; returns one row per mode.

    `context` > 0 searches like a chat turn whose conversation so far is the `context`
    questions asked before (the chat's two searches, `retrieval_queries`): with standalone
    questions that measures what a topic change costs. `via_cli` ranks the hybrid mode with
    the operation `--query-vector-store` runs, to show that it ranks as the chat does.
    """
    from ocat.chat.messages import retrieval_queries
    from ocat.memory import MemoryStore, RetrievalLimits, StoreLocation, retrieve
    from ocat.memory.retrieval.retrieve import retrieve_any
    from ocat.records import Exchange
    from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder
    from ocat.operations.search import search

    settings = bench_settings()
    vector_store = settings.vector_store
    embedder = OnnxMiniLMEmbedder(model_dir, threads=smoke.threads())
    results = {mode: ModeResult() for mode in modes}
    # The chat's own limits, listing max(KS) of the same ranking: R@5 is the chat's top 5.
    ranking = RetrievalLimits.from_settings(vector_store, results=max(KS))
    chat_limits = RetrievalLimits.from_settings(vector_store)
    with tempfile.TemporaryDirectory(prefix="ocat-recall-") as folder:
        for conv in conversations:
            store = MemoryStore.open(StoreLocation(path=Path(folder) / conv.sample_id), embedder, name="eval")
            store.add_exchanges(conv.exchanges)
            getattr(store, "wait_for_passages", lambda: True)()  # made in the background after a bulk write
            asked = conv.questions[:questions] if questions else conv.questions
            now = locomo_now(conv)
            others = [q for c in conversations if c is not conv for q in c.questions]
            others = others[:off_topic] if off_topic else others
            for mode in modes:
                result = results[mode]
                for index, q in enumerate(asked):
                    evidence = normalise_evidence(q["evidence"])
                    if not evidence:
                        continue
                    before = [
                        Exchange(user_prompt=p["question"], assistant_response="", thread_id="q", session_id="q")
                        for p in asked[max(0, index - context) : index]
                    ]
                    started = time.perf_counter()
                    if context and before:
                        queries = retrieval_queries(q["question"], before, context)
                        hits = retrieve_any(store, queries, ranking, now=now)
                    elif via_cli and mode == "hybrid":
                        # The operation `--query-vector-store --results 10` runs (ocat.operations.search).
                        hits = search([store], q["question"], vector_store, count=max(KS), now=now).hits
                    else:
                        hits = retrieve(store, q["question"], ranking, mode=mode, now=now)
                    result.latency_ms.append((time.perf_counter() - started) * 1000)
                    for k in KS:
                        covered = set().union(*(conv.dia_ids.get(h.id, set()) for h in hits[:k])) if hits else set()
                        share = len(evidence & covered) / len(evidence)
                        result.recall[k].append(share)
                        result.by_category.setdefault(q["category"], {kk: [] for kk in KS})[k].append(share)
                    gate = [h for h in retrieve(store, q["question"], chat_limits, mode=mode, now=now) if h.admitted]
                    result.admitted.append(any(conv.dia_ids.get(h.id, set()) & evidence for h in gate))
                for q in others:
                    gate = [h for h in retrieve(store, q["question"], chat_limits, mode=mode, now=now) if h.admitted]
                    result.quiet.append(not gate)
    return {mode: results[mode].row() for mode in modes}


def format_table(rows: dict[str, dict[str, Any]]) -> str:
    """The results as an aligned text table."""
    lines = []
    head = f"{'mode':<8} {'R@1':>6} {'R@3':>6} {'R@5':>6} {'R@10':>6} {'admit':>6} {'quiet':>6} {'mean':>7} {'p50':>7} {'p95':>7}"
    lines.append(head)
    lines.append("-" * len(head))
    for mode, row in rows.items():
        r = row["recall"]
        lines.append(
            f"{mode:<8} {r['R@1']:>6} {r['R@3']:>6} {r['R@5']:>6} {r['R@10']:>6} "
            f"{row['admitted']:>6} {row['quiet']:>6} {row['latency_mean_ms']:>6}ms {row['latency_p50_ms']:>6}ms "
            f"{row['latency_p95_ms']:>6}ms"
        )
    lines.append("")
    lines.append("R@5 by category:")
    for mode, row in rows.items():
        cats = "  ".join(f"{name} {v['R@5']}" for name, v in row["by_category"].items())
        lines.append(f"  {mode:<8} {cats}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: run the evaluation and print the table (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo-style JSON file")
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL, help="all-MiniLM-L6-v2 ONNX folder")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated: hybrid,dense,lexical")
    parser.add_argument("--questions", type=int, help="only the first N questions of each conversation")
    parser.add_argument("--off-topic", type=int, help="only the first N off-topic questions per store")
    parser.add_argument("--context", type=int, default=0, help="search as a chat turn after N earlier questions")
    parser.add_argument("--chats", type=Path, default=DEFAULT_CHATS, help="chats-dev style folder")
    parser.add_argument("--sets", default="locomo,chats", help="comma-separated: locomo,chats")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--via-cli", action="store_true",
                        help="rank the hybrid mode with --query-vector-store's operation (ocat.operations.search)")
    parser.add_argument("--folds", action="store_true",
                        help="cross-validate over conversations: every figure per held-out fold, mean and worst")
    parser.add_argument("--asked", type=Path,
                        help="with --folds: keep the retrieved scores in this file, and reuse them when it exists")
    parser.add_argument("--weights", help="with --folds: also fit the coverage weight among these (e.g. 0.6,0.8,1.2)")
    parser.add_argument("--time", choices=("on", "off"), default="on",
                        help="off: do not read a time the question names (vector_store.time_in_prompt false)")
    smoke.add_flag(parser)
    args = parser.parse_args(argv)
    smoke.start(args.smoke)
    if args.time == "off":
        recall_chats.SETTINGS_ENV["OCAT_VECTOR_STORE_TIME_IN_PROMPT"] = "false"
    sets = {s.strip() for s in args.sets.split(",") if s.strip()}
    for wanted, path in (("locomo", args.data), ("chats", args.chats / "questions.json")):
        if wanted in sets and not path.is_file():
            print(f"recall: no data at {path}", file=sys.stderr)
            return 1
    report: dict[str, Any] = {}
    if args.folds:
        from recall_folds import format_folds, run_folds

        report = run_folds(args.data if "locomo" in sets else None, args.chats if "chats" in sets else None, args.model,
                           asked_file=args.asked,
                           weights=[float(w) for w in args.weights.split(",") if w.strip()] if args.weights else ())
        print(json.dumps(report, indent=2) if args.json else format_folds(report))
        return 0
    if "locomo" in sets:
        report["locomo"] = evaluate(
            load_conversations(args.data),
            modes=[m.strip() for m in args.modes.split(",") if m.strip()],
            questions=args.questions,
            model_dir=args.model,
            off_topic=args.off_topic,
            context=args.context,
            via_cli=args.via_cli,
        )
        if not args.json:
            print(f"LoCoMo ({args.data.name})\n{format_table(report['locomo'])}\n")
    if "chats" in sets:
        report["chats"] = evaluate_chats(args.chats, args.model, questions=args.questions)
        if not args.json:
            print(f"chats-dev ({args.chats.name})\n{format_chats(report['chats'])}")
    if args.json:
        print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
