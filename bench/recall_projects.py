"""Projects: what preferring the chat's project (ProjectScope "prefer") gains and costs, per boost size.

Neither dev set has projects, so they are assigned here, deterministically, and every exchange is
stored with its `project` metadata (an exchange without one is global, as before projects):
- chats-dev (one store, 211 exchanges): its 42 threads in date order go to project A, B, global,
  A, B, global... (a resumed thread keeps its project). Its threads mix two or three subjects
  (its README), so a project is not a topic: the boost cannot help by knowing the subject, only
  by demoting the other project's near-duplicates.
- LoCoMo (one store for the three conversations, 742 exchanges): each conversation is a project
  (two people's lives: projects that differ in subject, as folders do), and every third session of
  each (3, 6, 9...) is global, so that a question about a conversation can be answered by a global
  memory while its own project holds the same people's other sessions.

Each recall question is asked as a chat turn that prefers a project:
- own: from the project that holds its target (most of its targets; LoCoMo: its conversation);
- global: its targets are all global (chats-dev: asked from A or B, fixed seed; LoCoMo: from its
  own conversation's project, whose sessions are about the same people);
- other: from a project that holds none of its targets (chats-dev: the other of A and B, skipped
  when A and B both hold one; LoCoMo: the next conversation's project).
"own" is what the boost is for; "other" and "global" (together "away") are its cost: a memory from
elsewhere, or a global one ("I am vegetarian"), must still come. Quiet: chats-dev's off-topic and
near questions, asked from A and B in turn; on LoCoMo all 203 chats-dev questions (no answer in
LoCoMo), asked from the three conversations' projects in turn.

Metrics as bench/recall_chats.py, from the chat's own search (5 exchanges, the gate, the token
budget): R@1, R@5, admitted (a target among the injected), precision (injected that are a target,
a superseded version of one, or on LoCoMo cover an evidence turn), quiet (nothing injected).

The boost is cross-validated (habit 17): for each held-out fold (chats-dev by the month of the
answer, LoCoMo by conversation) the size that maximises, on the other folds, the objective
admitted(own) + admitted(away) + quiet, each a percentage, summed over the two sets (so the cost
counts as much as the gain), is scored on the held-out fold. A size ships when, on each set, the
held-out objective holds against boost 0 on the mean and on the worst fold; else 0.0 ships.

    python bench/recall_projects.py                    # about 9 minutes on a loaded 2-core machine (most of it storing)
    python bench/recall_projects.py --sets chats --boosts 0.1,0.2 --json

Each store is built once; every boost size is asked of it (only RetrievalLimits.project changes).
"""

from __future__ import annotations

import random
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Sequence

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from recall import load_conversations, locomo_now, normalise_evidence  # noqa: E402
from recall_chats import CHATS_NOW, DEFAULT_CHATS, bench_settings, load_chats, pct  # noqa: E402
from recall_dated import CHATS_FOLDS, MONTREAL, boost_bench  # noqa: E402
from smoke import threads  # noqa: E402

BOOSTS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5)
# chats-dev's threads, in date order, cycle through these ("" is global).
CHATS_PROJECTS = ("/projects/a", "/projects/b", "")
SEED = 7  # which of A and B a global target's question is asked from
WHERES = ("own", "global", "other")


@dataclass(frozen=True)
class Ask:
    """One question asked from one project."""

    question: str
    project: str
    where: str  # own, global, other; "" for a quiet question
    fold: str
    targets: frozenset[str] = frozenset()  # exchange ids (chats-dev) or evidence turns (LoCoMo)
    right: frozenset[str] = frozenset()  # chats-dev: targets and their superseded versions
    now: datetime | None = None  # when it is asked (default: the set's)


@dataclass(frozen=True)
class Outcome:
    """One ask under one boost size."""

    set: str
    fold: str
    where: str
    r1: float
    r5: float
    admitted: bool
    injected: int
    right: int
    quiet: bool


class CachedEmbedder:
    """The embedder, remembering each text's vector: every boost size asks the same questions."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._seen: dict[str, list[float]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of `texts`, embedding only the ones not seen before."""
        new = [t for t in dict.fromkeys(texts) if t not in self._seen]
        if new:
            self._seen.update(zip(new, self._inner.embed(new)))
        return [self._seen[t] for t in texts]


def chats_asks(folder: Path) -> tuple[list[Any], list[Ask]]:
    """chats-dev's exchanges with their projects, and its questions as asks."""
    exchanges, questions = load_chats(folder)
    threads = list(dict.fromkeys(e.thread_id for e in sorted(exchanges, key=lambda e: e.timestamp)))
    project_of_thread = {t: CHATS_PROJECTS[i % len(CHATS_PROJECTS)] for i, t in enumerate(threads)}
    exchanges = [replace(e, project=project_of_thread[e.thread_id]) for e in exchanges]
    project = {e.exchange_id: e.project for e in exchanges}
    month = {e.exchange_id: datetime.fromtimestamp(e.timestamp, MONTREAL).strftime("%m") for e in exchanges}
    a, b = CHATS_PROJECTS[:2]
    pick = random.Random(SEED)
    spare = iter(["Jan", "Feb", "Mar-Apr", "May-Jun"] * len(questions))
    asks: list[Ask] = []
    for index, q in enumerate(questions):
        if q["kind"] != "recall":
            asks.append(Ask(q["question"], (a, b)[index % 2], "", next(spare)))
            continue
        targets = frozenset(q["targets"])
        right = targets | frozenset(q["superseded"])
        fold = CHATS_FOLDS[month[q["targets"][0]]]
        held = Counter(project[t] for t in q["targets"] if project[t])
        if not held:
            asks.append(Ask(q["question"], pick.choice((a, b)), "global", fold, targets, right))
            continue
        first = project[next(t for t in q["targets"] if project[t])]
        own = max(held, key=lambda p: (held[p], p == first))
        asks.append(Ask(q["question"], own, "own", fold, targets, right))
        others = [p for p in (a, b) if p not in held]
        if others:
            asks.append(Ask(q["question"], others[0], "other", fold, targets, right))
    return exchanges, asks


def locomo_project(sample_id: str) -> str:
    """The project a LoCoMo conversation is given."""
    return f"/projects/{sample_id}"


def locomo_asks(data: Path, chats: Path) -> tuple[list[Any], dict[str, set[str]], list[Ask]]:
    """LoCoMo's exchanges with their projects, the turns each covers, and its questions as asks."""
    conversations = load_conversations(data)
    exchanges: list[Any] = []
    dia_ids: dict[str, set[str]] = {}
    asks: list[Ask] = []
    names = [c.sample_id for c in conversations]
    for conv in conversations:
        for e in conv.exchanges:
            session = int(e.thread_id.rsplit("-", 1)[1])
            exchanges.append(replace(e, project="" if session % 3 == 0 else locomo_project(conv.sample_id)))
        dia_ids.update(conv.dia_ids)
        other = locomo_project(names[(names.index(conv.sample_id) + 1) % len(names)])
        for q in conv.questions:
            evidence = frozenset(normalise_evidence(q["evidence"]))
            if not evidence:
                continue
            sessions = {int(m.group(1)) for m in (re.match(r"D(\d+):", d) for d in evidence) if m}
            where = "own" if any(s % 3 for s in sessions) else "global"
            mine = locomo_project(conv.sample_id)
            asks.append(Ask(q["question"], mine, where, conv.sample_id, evidence, now=locomo_now(conv)))
            asks.append(Ask(q["question"], other, "other", conv.sample_id, evidence, now=locomo_now(conv)))
    # Quiet: chats-dev's questions have no answer in LoCoMo; asked from each conversation in turn.
    _, questions = load_chats(chats)
    for index, q in enumerate(questions):
        conv = conversations[index % len(conversations)]
        asks.append(Ask(q["question"], locomo_project(conv.sample_id), "", conv.sample_id, now=locomo_now(conv)))
    return exchanges, dia_ids, asks


def ask_all(
    name: str, exchanges: list[Any], asks: list[Ask], boosts: Sequence[float], model_dir: Path, tmp: Path,
    now: Any, covers: dict[str, set[str]] | None = None,
) -> list[tuple[float, Outcome]]:
    """Build the store once, then ask every ask under every boost size."""
    from ocat.memory import MemoryStore, RetrievalLimits, StoreLocation, admitted, retrieve
    from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder
    from ocat.memory.retrieval.project_scope import ProjectScope
    from ocat.memory.retrieval.given import within_budget

    vector_store = bench_settings().vector_store
    # The chat's own limits: its top 5 is the ranking R@5 reads (context_results is 5), so one
    # search gives both the ranking and what the chat would inject.
    chat = RetrievalLimits.from_settings(vector_store)
    store = MemoryStore.open(StoreLocation(path=tmp / name), CachedEmbedder(OnnxMiniLMEmbedder(model_dir, threads=threads())), name="eval")
    out: list[tuple[float, Outcome]] = []
    seen: dict[tuple[str, str, float, datetime | None], tuple[list[str], list[str]]] = {}
    try:
        started = time.perf_counter()
        store.add_exchanges(exchanges)
        store.wait_for_passages()
        print(f"{name}: {len(exchanges)} exchanges stored in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        started = time.perf_counter()
        for boost in boosts:
            for ask in asks:
                # Boost 0 prefers nothing: the search is the same from every project.
                key = (ask.question, ask.project if boost > 0 else "", boost, ask.now)
                if key not in seen:
                    limits = replace(chat, project=ProjectScope(ask.project, "prefer", boost))
                    hits = retrieve(store, ask.question, limits, now=ask.now or now)
                    injected = within_budget(admitted(hits), vector_store.memory_token_budget)
                    seen[key] = ([h.id for h in hits], [h.id for h in injected])
                ranked, given = seen[key]
                out.append((boost, _outcome(name, ask, ranked, given, covers)))
        print(f"{name}: {len(seen)} searches in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    finally:
        store.close()
    return out


def _outcome(name: str, ask: Ask, ranked: list[str], given: list[str], covers: dict[str, set[str]] | None) -> Outcome:
    if not ask.where:
        return Outcome(name, ask.fold, "", 0.0, 0.0, False, 0, 0, not given)
    if covers is None:  # chats-dev: targets are exchanges
        share = [len(ask.targets & set(ranked[:k])) / len(ask.targets) for k in (1, 5)]
        hit = [i in ask.targets for i in given]
        right = sum(i in ask.right for i in given)
    else:  # LoCoMo: targets are evidence turns, covered by exchanges
        share = [len(ask.targets & set().union(set(), *(covers.get(i, set()) for i in ranked[:k]))) / len(ask.targets)
                 for k in (1, 5)]
        hit = [bool(covers.get(i, set()) & ask.targets) for i in given]
        right = sum(hit)
    return Outcome(name, ask.fold, ask.where, share[0], share[1], any(hit), len(given), right, False)


def figures(outcomes: Iterable[Outcome]) -> dict[str, Any]:
    """Per where (own, global, other, away = global + other): R@1, R@5, admitted, precision; and quiet."""
    rows = list(outcomes)
    found: dict[str, Any] = {}
    for where in (*WHERES, "away"):
        mine = [o for o in rows if (o.where in ("global", "other") if where == "away" else o.where == where)]
        injected = sum(o.injected for o in mine)
        found[where] = {
            "R@1": pct([o.r1 for o in mine]),
            "R@5": pct([o.r5 for o in mine]),
            "admitted": pct([o.admitted for o in mine]),
            "precision": round(100 * sum(o.right for o in mine) / injected, 1) if injected else None,
            "questions": len(mine),
        }
    found["quiet"] = pct([o.quiet for o in rows if not o.where])
    found["objective"] = _objective(found)
    return found


def _objective(found: dict[str, Any]) -> float:
    return round(sum(v or 0.0 for v in (found["own"]["admitted"], found["away"]["admitted"], found["quiet"])), 1)


def objective(outcomes: Sequence[Outcome]) -> float:
    """What a boost is fitted on: admitted(own) + admitted(away) + quiet, summed over the sets."""
    return sum(figures(o for o in outcomes if o.set == s)["objective"] for s in {o.set for o in outcomes})


def cross_validate(asked: list[tuple[float, Outcome]], boosts: Sequence[float]) -> dict[str, Any]:
    """Per held-out fold: the size fitted on the other folds, and what it and boost 0 score there;
    per set, the mean and worst fold; and the verdict."""
    folds = sorted({(o.set, o.fold) for _, o in asked})
    per_fold: dict[str, Any] = {}
    for name, fold in folds:
        def training(boost: float, fold: str = fold) -> list[Outcome]:
            return [o for b, o in asked if b == boost and o.fold != fold]

        best = max(boosts, key=lambda b: (round(objective(training(b)), 6), -b))
        held = {b: figures(o for bb, o in asked if bb == b and o.fold == fold and o.set == name) for b in {0.0, best}}
        per_fold[f"{name}:{fold}"] = {"set": name, "boost": best, "before": held[0.0], "fitted": held[best]}
    summary: dict[str, Any] = {}
    holds = True
    for name in sorted({o.set for _, o in asked}):
        rows = [v for v in per_fold.values() if v["set"] == name]
        summary[name] = {}
        for label in ("before", "fitted"):
            values = {
                "own admitted": [r[label]["own"]["admitted"] for r in rows],
                "away admitted": [r[label]["away"]["admitted"] for r in rows],
                "own R@5": [r[label]["own"]["R@5"] for r in rows],
                "away R@5": [r[label]["away"]["R@5"] for r in rows],
                "quiet": [r[label]["quiet"] for r in rows],
                "objective": [r[label]["objective"] for r in rows],
            }
            summary[name][label] = {k: {"mean": round(statistics.fmean(x for x in v if x is not None), 1),
                                        "worst": min(x for x in v if x is not None)}
                                    for k, v in values.items() if any(x is not None for x in v)}
        before, fitted = summary[name]["before"]["objective"], summary[name]["fitted"]["objective"]
        holds = holds and fitted["mean"] >= before["mean"] and fitted["worst"] >= before["worst"]
    chosen = Counter(v["boost"] for v in per_fold.values())
    most = max(chosen, key=lambda b: (chosen[b], -b))
    shipped = most if holds else 0.0
    return {"folds": per_fold, "summary": summary, "chosen": {f"{b:g}": n for b, n in sorted(chosen.items())},
            "holds": holds, "shipped": shipped}


def run(data: Path | None, chats: Path | None, model_dir: Path, boosts: Sequence[float]) -> dict[str, Any]:
    """Ask everything, then the figures per set and size, and the size's cross-validation."""
    boosts = sorted({0.0, *boosts})
    asked: list[tuple[float, Outcome]] = []
    with tempfile.TemporaryDirectory(prefix="ocat-projects-") as tmp:
        if chats is not None:
            exchanges, asks = chats_asks(chats)
            asked += ask_all("chats", exchanges, asks, boosts, model_dir, Path(tmp), CHATS_NOW)
        if data is not None:
            exchanges, covers, asks = locomo_asks(data, DEFAULT_CHATS if chats is None else chats)
            # Each question is asked the day after its conversation's last session (as in bench/recall.py).
            asked += ask_all("locomo", exchanges, asks, boosts, model_dir, Path(tmp), None, covers)
    report: dict[str, Any] = {"sets": {}}
    for name in sorted({o.set for _, o in asked}):
        report["sets"][name] = {f"{b:g}": figures(o for bb, o in asked if bb == b and o.set == name) for b in boosts}
    report["cv"] = cross_validate(asked, boosts)
    return report


def format_report(report: dict[str, Any]) -> str:
    """The figures as markdown tables."""
    lines: list[str] = []
    for name, rows in report["sets"].items():
        first = next(iter(rows.values()))
        counts = ", ".join(f"{w} {first[w]['questions']}" for w in WHERES)
        lines.append(f"**{name}** (asks: {counts}; R@1 / R@5 / admitted / precision)\n")
        lines.append("| boost | own | global | other | away admitted | quiet | objective |")
        lines.append("|---|---|---|---|---|---|---|")
        for boost, row in rows.items():
            cells = [" / ".join(str(row[w][k]) for k in ("R@1", "R@5", "admitted", "precision")) for w in WHERES]
            lines.append(f"| {boost} | " + " | ".join(cells) + f" | {row['away']['admitted']} | {row['quiet']} | "
                         f"{row['objective']} |")
        lines.append("")
    cv = report["cv"]
    lines.append("Cross-validated: per held-out fold, the size fitted on the other folds; "
                 "own admitted / away admitted / quiet, boost 0 -> fitted\n")
    lines.append("| fold | fitted | boost 0 | fitted size |")
    lines.append("|---|---|---|---|")
    for fold, row in cv["folds"].items():
        said = {k: f"{row[k]['own']['admitted']} / {row[k]['away']['admitted']} / {row[k]['quiet']}"
                for k in ("before", "fitted")}
        lines.append(f"| {fold} | {row['boost']:g} | {said['before']} | {said['fitted']} |")
    lines.append("")
    lines.append("| set | | " + " | ".join(next(iter(next(iter(cv["summary"].values())).values()))) + " |")
    lines.append("|---|---|" + "---|" * len(next(iter(next(iter(cv["summary"].values())).values()))))
    for name, by in cv["summary"].items():
        for label, values in by.items():
            lines.append(f"| {name} | {label} (mean / worst) | "
                         + " | ".join(f"{v['mean']} / {v['worst']}" for v in values.values()) + " |")
    lines.append("")
    lines.append(f"Sizes chosen per fold: {cv['chosen']}; holds on both sets (mean and worst objective): {cv['holds']}; "
                 f"ships: {cv['shipped']:g}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry (size 0, before, is always measured too)."""
    return boost_bench(__doc__ or "", BOOSTS, run, format_report, argv)


if __name__ == "__main__":
    raise SystemExit(main())
