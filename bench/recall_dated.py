"""Time in the question: retrieval for questions that name a time, per time policy (docs/RETRIEVAL.md).

chats-dev: bench/dated_questions.json, questions written for ocat over chats-dev's history
(ids and dates only come from ../shared), each asked at its own "now". The store holds the
history up to that now: the questions are asked in order of their now while the history is
added (the store's floor measured again at each step). Each recall question has a type:
`dated` (the words name when it was said: "R@5 within the range"), `loose` (the user
misremembers the time a little) and `event` (the words name when the thing happens, not when
it was discussed); offtopic and near questions name a time and have no answer.
LoCoMo: the questions of locomo-dev that name a time (as `time_range` reads them), asked the day
after the conversation's last session; its quiet: the other conversations' dated questions.

Policies (ocat.memory.retrieval.retrieve.TimePolicy): off (before), restrict (shipped), strict,
and boost with a size per `--boosts`; the boost is also cross-validated: for each held-out fold
(chats-dev by the month of the answer, LoCoMo by conversation) the size that maximises
admitted + quiet on the other folds is scored on it.

    python bench/recall_dated.py                     # about 3 minutes
    python bench/recall_dated.py --boosts 0.1,0.3 --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Sequence
from zoneinfo import ZoneInfo

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import smoke  # noqa: E402
from recall import DEFAULT_DATA, DEFAULT_MODEL, load_conversations, locomo_now, normalise_evidence  # noqa: E402
from recall_chats import DEFAULT_CHATS, bench_settings, load_chats, pct  # noqa: E402

DATED = REPO / "bench" / "dated_questions.json"
BOOSTS = (0.05, 0.1, 0.2, 0.3, 0.5, 1.0)
CHATS_FOLDS = {"01": "Jan", "02": "Feb", "03": "Mar-Apr", "04": "Mar-Apr", "05": "May-Jun", "06": "May-Jun"}
MONTREAL = ZoneInfo("America/Montreal")  # chats-dev's user (its README)
TYPES = ("dated", "loose", "event")


@dataclass(frozen=True)
class Outcome:
    """One question asked under one policy."""

    set: str
    fold: str
    kind: str  # recall, offtopic, near
    type: str  # dated, loose, event (recall)
    r1: float
    r5: float
    admitted: bool
    quiet: bool


def policies(boosts: Sequence[float]) -> list[str]:
    """The policies measured, by name: off, restrict, strict, boost:<size>."""
    return ["off", "restrict", "strict", *(f"boost:{b:g}" for b in boosts)]


def _limits(name: str, vector_store: Any, results: int | None = None) -> Any:
    from ocat.memory import RetrievalLimits

    limits = RetrievalLimits.from_settings(vector_store, results=results)
    if name.startswith("boost:"):
        return replace(limits, time_policy="boost", time_boost=float(name.split(":", 1)[1]))
    return replace(limits, time_policy=name)


def _ask(store: Any, question: str, now: datetime, name: str, vector_store: Any) -> tuple[list[Any], list[str]]:
    """The ranking (top 10 listed) and what a chat turn would give the model, under a policy."""
    from ocat.memory import admitted, retrieve
    from ocat.memory.retrieval.given import within_budget

    ranking = retrieve(store, question, _limits(name, vector_store, results=10), now=now)
    given = within_budget(admitted(retrieve(store, question, _limits(name, vector_store), now=now)),
                          vector_store.memory_token_budget)
    return ranking, [h.id for h in given]


def ask_chats(folder: Path, dated: Path, model_dir: Path, names: Sequence[str], tmp: Path) -> list[tuple[str, Outcome]]:
    """Every dated chats-dev question under every policy, the store holding the history up to its now."""
    from ocat.memory import MemoryStore, StoreLocation
    from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder
    from ocat.memory.retrieval.store_floor import floor_of

    exchanges, _ = load_chats(folder)
    month = {e.exchange_id: datetime.fromtimestamp(e.timestamp, MONTREAL).strftime("%m") for e in exchanges}
    questions = smoke.kept_questions(json.loads(dated.read_text(encoding="utf-8")), set(month))
    vector_store = bench_settings().vector_store
    store = MemoryStore.open(StoreLocation(path=tmp / "chats"), OnnxMiniLMEmbedder(model_dir, threads=smoke.threads()), name="eval")
    out: list[tuple[str, Outcome]] = []
    added = 0
    spare = iter(("Jan", "Feb", "Mar-Apr", "May-Jun") * len(questions))
    try:
        for now_text in sorted({q["now"] for q in questions}):
            now = datetime.fromisoformat(now_text)
            upto = [e for e in exchanges if e.timestamp <= now.timestamp()]
            if len(upto) > added:
                store.add_exchanges(upto[added:])
                store.wait_for_passages()
                added = len(upto)
                floor_of(store).measure()  # as the chat would have it by then, without waiting on a thread
            for q in (q for q in questions if q["now"] == now_text):
                fold = CHATS_FOLDS[month[q["targets"][0]]] if q["targets"] else next(spare)
                targets = set(q["targets"])
                for name in names:
                    ranking, given = _ask(store, q["question"], now, name, vector_store)
                    ids = [h.id for h in ranking]
                    r1 = len(targets & set(ids[:1])) / len(targets) if targets else 0.0
                    r5 = len(targets & set(ids[:5])) / len(targets) if targets else 0.0
                    out.append((name, Outcome("chats", fold, q["kind"], q["type"], r1, r5,
                                              bool(targets & set(given)), not given)))
    finally:
        store.close()
    return out


def dated_locomo(conversations: Sequence[Any]) -> dict[str, list[dict[str, Any]]]:
    """Each conversation's questions that name a time, seen from the day after its last session."""
    from ocat.memory.retrieval.time_range import time_range

    return {
        c.sample_id: [q for q in c.questions if normalise_evidence(q["evidence"]) and time_range(q["question"], locomo_now(c))]
        for c in conversations
    }


def ask_locomo(data: Path, model_dir: Path, names: Sequence[str], tmp: Path) -> list[tuple[str, Outcome]]:
    """LoCoMo's dated questions under every policy, one store per conversation."""
    from ocat.memory import MemoryStore, StoreLocation
    from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder

    conversations = load_conversations(data)
    dated = dated_locomo(conversations)
    vector_store = bench_settings().vector_store
    embedder = OnnxMiniLMEmbedder(model_dir, threads=smoke.threads())
    out: list[tuple[str, Outcome]] = []
    for conv in conversations:
        now = locomo_now(conv)
        store = MemoryStore.open(StoreLocation(path=tmp / conv.sample_id), embedder, name="eval")
        try:
            store.add_exchanges(conv.exchanges)
            store.wait_for_passages()
            for q in dated[conv.sample_id]:
                evidence = normalise_evidence(q["evidence"])
                for name in names:
                    ranking, given = _ask(store, q["question"], now, name, vector_store)
                    share = [len(evidence & set().union(set(), *(conv.dia_ids.get(h.id, set()) for h in ranking[:k])))
                             / len(evidence) for k in (1, 5)]
                    right = any(conv.dia_ids.get(i, set()) & evidence for i in given)
                    out.append((name, Outcome("locomo", conv.sample_id, "recall", "dated", share[0], share[1], right,
                                              not given)))
            for other in (c for c in conversations if c is not conv):
                for q in dated[other.sample_id]:
                    for name in names:
                        _, given = _ask(store, q["question"], now, name, vector_store)
                        out.append((name, Outcome("locomo", conv.sample_id, "offtopic", "dated", 0.0, 0.0, False,
                                                  not given)))
        finally:
            store.close()
    return out


def figures(outcomes: Iterable[Outcome]) -> dict[str, float | None]:
    """R@1 and R@5 (dated recall: within the range; loose; event), admitted (all recall), quiet."""
    rows = list(outcomes)
    recall = [o for o in rows if o.kind == "recall"]
    by_type = {t: [o for o in recall if o.type == t] for t in TYPES}
    return {
        "R@1": pct([o.r1 for o in by_type["dated"]]),
        "R@5": pct([o.r5 for o in by_type["dated"]]),
        "R@5 loose": pct([o.r5 for o in by_type["loose"]]),
        "R@5 event": pct([o.r5 for o in by_type["event"]]),
        "R@5 all": pct([o.r5 for o in recall]),
        "admitted": pct([o.admitted for o in by_type["dated"]]),
        "admitted all": pct([o.admitted for o in recall]),
        "quiet": pct([o.quiet for o in rows if o.kind != "recall"]),
        "questions": len(recall),
    }


def objective(outcomes: Sequence[Outcome]) -> float:
    """What a boost is fitted on: admitted (every recall question) + quiet, summed over the sets."""
    total = 0.0
    for name in {o.set for o in outcomes}:
        mine = [o for o in outcomes if o.set == name]
        total += (pct([o.admitted for o in mine if o.kind == "recall"]) or 0.0)
        total += (pct([o.quiet for o in mine if o.kind != "recall"]) or 0.0)
    return total


def cross_validate(asked: list[tuple[str, Outcome]], boosts: Sequence[float]) -> dict[str, Any]:
    """Per held-out fold: the boost fitted on the other folds, and what it and `restrict` score there."""
    folds = sorted({o.fold for _, o in asked})
    per_fold: dict[str, Any] = {}
    for fold in folds:
        def training(name: str, fold: str = fold) -> list[Outcome]:
            return [o for n, o in asked if n == name and o.fold != fold]

        best = max(boosts, key=lambda b: (objective(training(f"boost:{b:g}")), -b))
        held = {name: figures(o for n, o in asked if n == name and o.fold == fold)
                for name in ("off", "restrict", f"boost:{best:g}")}
        per_fold[fold] = {"boost": best, "off": held["off"], "restrict": held["restrict"],
                          "boost_cv": held[f"boost:{best:g}"]}
    summary = {}
    for name in ("off", "restrict", "boost_cv"):
        summary[name] = {}
        for key in ("R@5", "R@5 all", "admitted all", "quiet"):
            values = [v[name][key] for v in per_fold.values() if v[name][key] is not None]
            summary[name][key] = {"mean": round(statistics.fmean(values), 1) if values else None,
                                  "worst": min(values) if values else None}
    return {"folds": per_fold, "summary": summary}


def run(data: Path | None, chats: Path | None, model_dir: Path, boosts: Sequence[float]) -> dict[str, Any]:
    """Ask everything, then the figures per set and policy, and the boost's cross-validation."""
    names = policies(boosts)
    asked: list[tuple[str, Outcome]] = []
    with tempfile.TemporaryDirectory(prefix="ocat-dated-") as tmp:
        if chats is not None:
            asked += ask_chats(chats, DATED, model_dir, names, Path(tmp))
        if data is not None:
            asked += ask_locomo(data, model_dir, names, Path(tmp))
    report: dict[str, Any] = {"sets": {}}
    for name_set in sorted({o.set for _, o in asked}):
        report["sets"][name_set] = {name: figures(o for n, o in asked if n == name and o.set == name_set)
                                    for name in names}
    report["cv"] = cross_validate(asked, boosts)
    return report


def format_report(report: dict[str, Any]) -> str:
    """The figures as text tables."""
    keys = ("R@1", "R@5", "R@5 loose", "R@5 event", "R@5 all", "admitted", "admitted all", "quiet")
    lines = []
    for name_set, rows in report["sets"].items():
        lines.append(f"{name_set} ({next(iter(rows.values()))['questions']} recall questions; R@1, R@5, admitted: "
                     "the words name when it was said)")
        lines.append(f"{'policy':<12}" + "".join(f"{k:>14}" for k in keys))
        for name, row in rows.items():
            lines.append(f"{name:<12}" + "".join(f"{row[k]!s:>14}" for k in keys))
        lines.append("")
    cv = report["cv"]
    lines.append("cross-validated (held-out fold: fitted boost; R@5, admitted all, quiet for off / restrict / boost)")
    for fold, row in cv["folds"].items():
        said = "  ".join(f"{n} {row[n]['R@5']}/{row[n]['admitted all']}/{row[n]['quiet']}"
                         for n in ("off", "restrict", "boost_cv"))
        lines.append(f"  {fold:<10} boost {row['boost']:<5g} {said}")
    for name, row in cv["summary"].items():
        lines.append(f"  {name:<10} " + "  ".join(f"{k} {v['mean']} (worst {v['worst']})" for k, v in row.items()))
    return "\n".join(lines)


def boost_bench(doc: str, boosts: Sequence[float], run: Any, report: Any, argv: list[str] | None) -> int:
    """The command line of a bench that tries boost sizes on both dev sets (this one, and
    recall_projects.py): `run(locomo, chats, model, sizes)` measures, `report` formats."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo-style JSON file")
    parser.add_argument("--chats", type=Path, default=DEFAULT_CHATS, help="chats-dev style folder")
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL, help="all-MiniLM-L6-v2 ONNX folder")
    parser.add_argument("--sets", default="chats,locomo", help="comma-separated: chats,locomo")
    parser.add_argument("--boosts", default=",".join(f"{b:g}" for b in boosts), help="boost sizes (z units) to try")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    smoke.add_flag(parser)
    args = parser.parse_args(argv)
    smoke.start(args.smoke)
    sets = {s.strip() for s in args.sets.split(",") if s.strip()}
    found = run(args.data if "locomo" in sets else None, args.chats if "chats" in sets else None, args.model,
                [float(b) for b in args.boosts.split(",") if b.strip()])
    print(json.dumps(found, indent=2) if args.json else report(found))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command-line entry."""
    return boost_bench(__doc__ or "", BOOSTS, run, format_report, argv)


if __name__ == "__main__":
    raise SystemExit(main())
