"""Cross-validated retrieval figures: every number measured on conversations the gate was not fitted on.

`python bench/recall.py --folds` runs this. The protocol (docs/RETRIEVAL.md, "Folds"):

- **Folds.** LoCoMo: leave one conversation out (3 folds; each conversation is its own store,
  and its off-topic questions are the other conversations'). chats-dev: one store, its
  questions grouped by the month their thread started (Jan | Feb | Mar-Apr | May-Jun);
  a near question goes with the thread it sits next to, off-topic ones round-robin.
- **What is fitted.** The gate's three constants: the calibration's point for relevance 0.65
  (`point`), the margin above the store's floor (`floor_margin`) and the margin below the best
  hit (`best_margin`). For each held-out fold they are fitted on everything else (the other
  folds of the same set and all of the other set) by a grid search that maximises
  J = admitted + quiet, summed over the two sets (chats-dev's quiet is the mean of off-topic
  and near; the stricter gate on a tie), and the held-out fold is scored with them. (Fitting
  "the most admitted that keeps quiet >= 95 / near >= 50 on the training folds" was tried and
  dropped: at the edge of its constraints it flipped from fold to fold, near 17 on one.)
  newer_first: for the questions about a fact that changed, the share where the newest version
  ranks above every older one (top 10); newer_read: the share where the model is given the
  newest version and reads it before any older one shown with it. The ranking (R@k) has no fitted
  constant here: a ranking change is a code change, reported per fold, mean and worst.
- **Shipped** is the same fit on all folds; `live` is what the shipped code does unchanged.

Each question is retrieved once, with the chat's own code, and its top 10 kept with each hit's
fused score z; a gate with other constants is then replayed on those scores (the chat's rule:
z over the gate and within the margin of the best of the top 5, context with its memory, the
memory token budget), so fitting costs no retrieval.
"""

from __future__ import annotations

import itertools
import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

KS = (1, 3, 5, 10)
LOCOMO_FOLDS = ("conv-26", "conv-30", "conv-41")
# chats-dev threads by the month they started: four groups of 8-14 threads.
CHATS_FOLDS = {"01": "Jan", "02": "Feb", "03": "Mar-Apr", "04": "Mar-Apr", "05": "May-Jun", "06": "May-Jun"}
# The grids the fit searches (z units; the shipped values sit inside them).
POINTS = [round(0.40 + 0.01 * i, 2) for i in range(71)]
FLOOR_MARGINS = [round(0.10 + 0.01 * i, 2) for i in range(31)]
BEST_MARGINS = [0.25, 0.30, 0.35, 0.40, 0.45, 0.50, 0.55, 0.65, 0.75]
FOLD_ORDER = ("Jan", "Feb", "Mar-Apr", "May-Jun", *LOCOMO_FOLDS)


@dataclass(frozen=True)
class Hit:
    """One retrieved memory as the replayed gate needs it."""

    id: str
    z: float
    tokens: int
    context_of: str | None
    found: frozenset[str]  # the evidence (LoCoMo dia ids, chats-dev target ids) this hit covers
    right: bool  # a target or a superseded version (chats-dev), or evidence (LoCoMo)
    superseded: bool = False
    timestamp: float = 0.0


@dataclass
class Asked:
    """One question asked of one store: its top 10 and what the gate needs to be replayed."""

    set: str
    fold: str
    kind: str  # recall, offtopic, near
    hits: list[Hit]
    need: int  # evidence items (recall)
    floor: float | None  # the store's floor median (None: too small to have one)
    budget: int
    has_superseded: bool = False


@dataclass(frozen=True)
class Gate:
    """The gate's three fitted constants."""

    point: float
    floor_margin: float
    best_margin: float

    def standing(self, asked: Asked, *, reach: int = 5) -> set[str]:
        """The ids among the first `reach` that stand on their own (verdicts.verdicts)."""
        top = asked.hits[:reach]
        gate = self.point if asked.floor is None else max(self.point, asked.floor + self.floor_margin)
        best = max((h.z for h in top), default=0.0)
        return {h.id for h in top if h.z >= gate and h.z >= best - self.best_margin}

    def shown(self, asked: Asked, *, reach: int = 5) -> list[Hit]:
        """What a chat turn would give the model: replays ocat.memory.retrieval.verdicts.verdicts
        and within_budget on the stored scores."""
        top = asked.hits[:reach]
        standing = self.standing(asked, reach=reach)
        kept: list[Hit] = []
        used = 0
        for h in top:
            if h.id not in standing and not (h.context_of is not None and h.context_of in standing):
                continue
            if h.id not in standing and h.context_of not in {k.id for k in kept}:
                continue
            if used + h.tokens <= asked.budget:
                kept.append(h)
                used += h.tokens
        return kept


@dataclass
class Figures:
    """Per-fold sums, turned into percentages by `row`."""

    recall: dict[int, list[float]] = field(default_factory=lambda: {k: [] for k in KS})
    admitted: list[bool] = field(default_factory=list)
    shown: int = 0
    right: int = 0
    quiet: dict[str, list[bool]] = field(default_factory=lambda: {"offtopic": [], "near": []})
    newer_first: list[bool] = field(default_factory=list)
    newer_read_first: list[bool] = field(default_factory=list)

    def row(self) -> dict[str, float | None]:
        """Percentages (one decimal), None where a fold has no such question."""
        return {
            **{f"R@{k}": _pct(v) for k, v in self.recall.items()},
            "admitted": _pct(self.admitted),
            "precision": round(100 * self.right / self.shown, 1) if self.shown else None,
            "quiet_off": _pct(self.quiet["offtopic"]),
            "quiet_near": _pct(self.quiet["near"]) if self.quiet["near"] else None,
            "newer_first": _pct(self.newer_first),
            "newer_read": _pct(self.newer_read_first),
        }


def _pct(values: Sequence[float] | Sequence[bool]) -> float | None:
    return round(100 * sum(values) / len(values), 1) if values else None


def score(asked: Iterable[Asked], gate: Gate) -> Figures:
    """The figures of some questions under one gate."""
    out = Figures()
    for a in asked:
        if a.kind != "recall":
            out.quiet[a.kind].append(not gate.shown(a))
            continue
        hits = a.hits
        for k in KS:
            covered = frozenset().union(*(h.found for h in hits[:k]))
            out.recall[k].append(len(covered) / a.need)
        shown = gate.shown(a)
        out.admitted.append(any(h.found for h in shown))
        out.shown += len(shown)
        out.right += sum(h.right for h in shown)
        if a.has_superseded:
            out.newer_first.append(newest_above_old(hits))
            out.newer_read_first.append(newest_above_old(reading_order(shown)))
    return out


def reading_order(shown: Sequence[Hit]) -> list[Hit]:
    """The shown memories in the order the model reads them: newest first where ocat.chat.messages has
    `reading_order` (stable, so a replay of that rule), else as ranked (code from before it)."""
    try:
        from ocat.chat.messages import reading_order as _ocat_order  # noqa: F401 - present or not is the switch
    except ImportError:
        return list(shown)
    return sorted(shown, key=lambda h: -h.timestamp)


def newest_above_old(hits: Sequence[Hit]) -> bool:
    """Whether a target ranks above every superseded version of it in the top 10."""
    first_target = next((n for n, h in enumerate(hits) if h.found), None)
    if first_target is None:
        return False
    return all(n > first_target for n, h in enumerate(hits) if h.superseded)


def objective(asked: Sequence[Asked], gate: Gate) -> float:
    """The fit's objective J: per set, admitted + quiet (chats-dev's quiet is the mean of
    off-topic and near), summed over the sets; `_Outcomes.objective` computes the same faster."""
    total = 0.0
    for name in {a.set for a in asked}:
        f = score((a for a in asked if a.set == name), gate).row()
        quiet = [v for v in (f["quiet_off"], f["quiet_near"]) if v is not None]
        total += (f["admitted"] or 0.0) + (statistics.fmean(quiet) if quiet else 0.0)
    return total


class _Outcomes:
    """The gate's outcome for every question at every threshold, for one best margin, as arrays.

    Under a threshold g a question's standing hits are its top-5 hits with z >= g among those
    within the margin of the best: as g falls they join in z order, so a question has at most
    six outcomes (0-5 standing) and a gate only picks one per question. `objective` on the
    arrays is the same number as `objective` above, thousands of times faster.
    """

    def __init__(self, asked: Sequence[Asked], best_margin: float) -> None:
        import numpy as np

        self.np = np
        n = len(asked)
        self.z = np.full((n, 5), -np.inf)
        self.admitted = np.zeros((n, 6), dtype=bool)
        self.quiet = np.zeros((n, 6), dtype=bool)
        self.floor = np.array([np.nan if a.floor is None else a.floor for a in asked])
        for row, a in enumerate(asked):
            top = a.hits[:5]
            best = max((h.z for h in top), default=0.0)
            eligible = sorted((h.z for h in top if h.z >= best - best_margin), reverse=True)
            self.z[row, : len(eligible)] = eligible
            for k in range(6):
                # The gate that lets exactly the k best eligible hits stand.
                g = eligible[k - 1] if 0 < k <= len(eligible) else (np.inf if k == 0 else -np.inf)
                shown = Gate(g, -np.inf, best_margin).shown(a) if k else []
                self.admitted[row, k] = any(h.found for h in shown)
                self.quiet[row, k] = not shown
        self.groups = {}
        for name in {a.set for a in asked}:
            self.groups[name] = {
                kind: np.array([a.set == name and a.kind == kind for a in asked]) for kind in ("recall", "offtopic", "near")
            }

    def objective(self, point: float, floor_margin: float) -> float:
        """`objective` for the gate (point, floor_margin, this table's best margin)."""
        np = self.np
        g = np.where(np.isnan(self.floor), point, np.maximum(point, self.floor + floor_margin))
        k = (self.z >= g[:, None]).sum(axis=1)
        rows = np.arange(len(k))
        admitted, quiet = self.admitted[rows, k], self.quiet[rows, k]
        total = 0.0
        for masks in self.groups.values():
            rec, off, near = masks["recall"], masks["offtopic"], masks["near"]
            quiets = [100 * quiet[m].mean() for m in (off, near) if m.any()]
            total += (100 * admitted[rec].mean() if rec.any() else 0.0) + (float(np.mean(quiets)) if quiets else 0.0)
        return float(total)


def fit(asked: Sequence[Asked]) -> tuple[Gate, float]:
    """The gate that maximises the objective on `asked` (ties: the stricter gate, quieter being
    the safer side), and the objective it reaches."""
    best: tuple[float, float, Gate] | None = None
    for margin in BEST_MARGINS:
        table = _Outcomes(asked, margin)
        for point, floor_margin in itertools.product(POINTS, FLOOR_MARGINS):
            key = (round(table.objective(point, floor_margin), 6), point + floor_margin)
            if best is None or key > best[:2]:
                best = (*key, Gate(point, floor_margin, margin))
    assert best is not None
    return best[2], best[0]


def fit_weight(by_weight: dict[float, list[Asked]], keep: Any) -> tuple[float, Gate]:
    """The coverage weight and gate that reach the highest objective on the questions `keep`
    selects, each weight's gate fitted on its own scores (ties: the weight nearest 1)."""
    fits = {w: fit([a for a in asked if keep(a)]) for w, asked in by_weight.items()}
    weight = max(fits, key=lambda w: (fits[w][1], -abs(w - 1.0)))
    return weight, fits[weight][0]


def cross_validate(by_weight: dict[float, list[Asked]]) -> dict[str, Any]:
    """Every fold of both sets scored with the coverage weight and gate fitted on everything
    else, plus the fit on all. `by_weight` holds the questions asked with each coverage weight
    (one weight: only the gate is fitted)."""
    report: dict[str, Any] = {"folds": {}, "gates": {}}
    any_asked = next(iter(by_weight.values()))
    for name in sorted({a.set for a in any_asked}):
        for fold in sorted({a.fold for a in any_asked if a.set == name}, key=FOLD_ORDER.index):
            def outside(a: Asked, name: str = name, fold: str = fold) -> bool:
                return not (a.set == name and a.fold == fold)

            weight, gate = fit_weight(by_weight, outside)
            held = [a for a in by_weight[weight] if not outside(a)]
            report["folds"].setdefault(name, {})[fold] = score(held, gate).row()
            report["gates"][f"{name}/{fold}"] = {**gate.__dict__, "coverage_weight": weight}
    weight, gate = fit_weight(by_weight, lambda a: True)
    report["shipped_fit"] = {**gate.__dict__, "coverage_weight": weight}
    return report


def summary(rows: dict[str, dict[str, float | None]]) -> dict[str, dict[str, float | None]]:
    """Mean and worst fold of every figure (worst: the lowest)."""
    keys = next(iter(rows.values())).keys()
    out: dict[str, dict[str, float | None]] = {"mean": {}, "worst": {}}
    for key in keys:
        values = [r[key] for r in rows.values() if r[key] is not None]
        out["mean"][key] = round(statistics.fmean(values), 1) if values else None
        out["worst"][key] = min(values) if values else None
    return out


COLUMNS = ("R@1", "R@3", "R@5", "R@10", "admitted", "precision", "quiet_off", "quiet_near", "newer_first", "newer_read")


def format_folds(report: dict[str, Any]) -> str:
    """Both sets' fold tables, with mean and worst fold, and the gates fitted."""
    lines = []
    for name, rows in report["folds"].items():
        lines.append(f"{name}: cross-validated (gate fitted on the other folds and the other set)")
        head = f"{'fold':<9}" + "".join(f"{c[:7]:>8}" for c in COLUMNS)
        lines += [head, "-" * len(head)]
        for fold, row in {**rows, **summary(rows)}.items():
            lines.append(f"{fold:<9}" + "".join(f"{'-' if row[c] is None else row[c]:>8}" for c in COLUMNS))
        lines.append("")
    lines.append("fitted per held-out fold (point, floor_margin, best_margin, coverage_weight):")
    for fold, g in [*report["gates"].items(), ("fit on all", report["shipped_fit"])]:
        lines.append(f"  {fold:<16} {g['point']:.2f} {g['floor_margin']:.2f} {g['best_margin']:.2f}"
                     f" {g['coverage_weight']:.2f}")
    if "live" in report:
        lines.append("")
        for name, row in report["live"].items():
            lines.append(f"live ({name}, shipped constants, all questions): "
                         + "  ".join(f"{c} {row[c]}" for c in COLUMNS if row[c] is not None))
    if "late_facts" in report:
        lines.append("")
        lines.append("late facts (5 questions whose answer is past the first window, tests/support/late_facts.py):")
        for label, row in report["late_facts"].items():
            lines.append(f"  {label:<14} ranked first {row['first']}  admitted {row['admitted']}")
    return "\n".join(lines)


# -- asking -------------------------------------------------------------------

# Called with each question as it is asked: the open store, the question (as the data set has
# it), what was asked, and what evidence a record id covers.
Also = Callable[[Any, dict[str, Any], Asked, Callable[[str], set[str]]], None]


def _hits(store: Any, question: str, limits: Any, now: Any) -> tuple[list[Any], float | None]:
    """The chat's ranking of a question (top 10, first 5 with the chat's verdicts) and the
    store's floor median."""
    from ocat.memory import retrieve
    from ocat.memory.retrieval.store_floor import floor_of

    hits = retrieve(store, question, limits, now=now)
    floor = floor_of(store)
    floor.shift()  # measures it on first use, as a chat turn would
    known = floor.current() if store.lexical.count("exchange") >= 20 else None
    return [h for h in hits if h.kind == "exchange"], (known.median if known else None)


def _z(store: Any, floor: float | None, score_: float) -> float:
    """A hit's fused score z, recovered from the relevance the chat computed with the floor."""
    from ocat.memory.retrieval.store_floor import FLOOR_MARGIN

    calibration = store.calibration
    shift = 0.0 if floor is None else max(0.0, floor + FLOOR_MARGIN - calibration.z_at(0.65))
    clipped = min(max(score_, 1e-9), 1 - 1e-9)
    return calibration.raised(shift).z_at(clipped)


def _weighted(store: Any, coverage_weight: float | None) -> None:
    """Score the store with another coverage weight (the fit's trial), before its first search."""
    from dataclasses import replace

    if coverage_weight is not None:
        store.calibration = replace(store.calibration, coverage_weight=coverage_weight)


def ask_locomo(conversations: Sequence[Any], model_dir: Path, folder: Path, coverage_weight: float | None = None,
               also: Also | None = None) -> list[Asked]:
    """Every LoCoMo question (and every other conversation's, as off-topic) against each store;
    `also` is called with each question asked (bench/tool_recall.py: the model's own search)."""
    from recall import locomo_now, normalise_evidence
    from recall_chats import bench_settings

    from ocat.memory import MemoryStore, RetrievalLimits, StoreLocation
    from smoke import threads
    from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder
    from ocat.text.tokens import estimate_tokens

    settings = bench_settings().vector_store
    limits = RetrievalLimits.from_settings(settings, results=max(KS))
    embedder = OnnxMiniLMEmbedder(model_dir, threads=threads())
    asked: list[Asked] = []
    for conv in conversations:
        store = MemoryStore.open(StoreLocation(path=folder / conv.sample_id), embedder, name="eval")
        _weighted(store, coverage_weight)
        store.add_exchanges(conv.exchanges)
        getattr(store, "wait_for_passages", lambda: True)()  # made in the background after a bulk write
        when = {e.exchange_id: e.timestamp for e in conv.exchanges}
        mine = [(q, "recall") for q in conv.questions]
        others = [(q, "offtopic") for c in conversations if c is not conv for q in c.questions]
        for q, kind in mine + others:
            evidence = normalise_evidence(q["evidence"]) if kind == "recall" else set()
            if kind == "recall" and not evidence:
                continue
            found, floor = _hits(store, q["question"], limits, locomo_now(conv))
            hits = []
            for h in found:
                covers = frozenset(conv.dia_ids.get(h.id, set()) & evidence)
                hits.append(Hit(h.id, _z(store, floor, h.score), estimate_tokens(h.text), h.context_of, covers,
                                bool(covers), timestamp=when.get(h.id, 0.0)))
            asked.append(Asked("locomo", conv.sample_id, kind, hits, len(evidence), floor,
                               settings.memory_token_budget))
            if also is not None:
                also(store, q, asked[-1], lambda i, conv=conv, evidence=evidence: conv.dia_ids.get(i, set()) & evidence)
        store.close()
    return asked


def ask_chats(folder: Path, model_dir: Path, tmp: Path, coverage_weight: float | None = None,
              also: Also | None = None) -> list[Asked]:
    """Every chats-dev question against one store of its 211 exchanges (`also`: as ask_locomo)."""
    from recall_chats import CHATS_NOW, bench_settings, load_chats

    from ocat.memory import MemoryStore, RetrievalLimits, StoreLocation
    from smoke import threads
    from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder
    from ocat.text.tokens import estimate_tokens

    exchanges, questions = load_chats(folder)
    settings = bench_settings().vector_store
    limits = RetrievalLimits.from_settings(settings, results=max(KS))
    started = _thread_months(exchanges)
    month_of = {e.exchange_id: started[e.thread_id] for e in exchanges}
    when = {e.exchange_id: e.timestamp for e in exchanges}
    store = MemoryStore.open(StoreLocation(path=tmp / "chats"), OnnxMiniLMEmbedder(model_dir, threads=threads()), name="eval")
    _weighted(store, coverage_weight)
    store.add_exchanges(exchanges)
    getattr(store, "wait_for_passages", lambda: True)()
    asked: list[Asked] = []
    off = 0
    for q in questions:
        if q["kind"] == "offtopic":
            fold = sorted(set(CHATS_FOLDS.values()))[off % 4]
            off += 1
        else:
            fold = CHATS_FOLDS[month_of[(q["targets"] or q["related"])[0]]]
        found, floor = _hits(store, q["question"], limits, CHATS_NOW)
        targets, old = set(q["targets"]), set(q.get("superseded") or ())
        hits = [
            Hit(h.id, _z(store, floor, h.score), estimate_tokens(h.text), h.context_of,
                frozenset({h.id} & targets), h.id in targets or h.id in old, h.id in old, when.get(h.id, 0.0))
            for h in found
        ]
        asked.append(Asked("chats", fold, q["kind"], hits, max(1, len(targets)), floor,
                           settings.memory_token_budget, has_superseded=bool(old)))
        if also is not None:
            also(store, q, asked[-1], lambda i, targets=targets: {i} & targets)
    store.close()
    return asked


def _thread_months(exchanges: Sequence[Any]) -> dict[str, str]:
    """Each thread's starting month ("01".."06"), from its first exchange (UTC is close enough)."""
    from datetime import datetime, timezone

    first: dict[str, float] = {}
    for e in exchanges:
        first[e.thread_id] = min(first.get(e.thread_id, e.timestamp), e.timestamp)
    return {t: datetime.fromtimestamp(ts - 5 * 3600, tz=timezone.utc).strftime("%m") for t, ts in first.items()}


def run_folds(locomo: Path | None, chats: Path | None, model_dir: Path, *, asked_file: Path | None = None,
              weights: Sequence[float] = ()) -> dict[str, Any]:
    """Ask both sets, cross-validate the gate, and add the live figures of the shipped constants.

    `weights` also fits the coverage weight (each is asked once: about a minute each). `asked_file`
    keeps the questions' retrieved scores (pickled): given again, the fit is replayed on them
    without retrieving (to try fitting procedures; delete it after a code change).
    """
    import pickle

    from recall import load_conversations

    from ocat.memory.embedding.model_files import LOCAL_MODEL_NAME
    from ocat.memory.retrieval.verdicts import MARGIN
    from ocat.memory.retrieval.store_floor import FLOOR_MARGIN
    from ocat.memory.storage.scoring import calibration_for

    shipped_weight = calibration_for(LOCAL_MODEL_NAME).coverage_weight
    by_weight: dict[float, list[Asked]] = {}
    if asked_file is not None and asked_file.is_file():
        saved = pickle.loads(asked_file.read_bytes())
        by_weight = saved if isinstance(saved, dict) else {shipped_weight: saved}
    for weight in [shipped_weight, *weights]:
        if weight in by_weight:
            continue
        asked: list[Asked] = []
        with tempfile.TemporaryDirectory(prefix="ocat-folds-") as tmp:
            if locomo is not None:
                asked += ask_locomo(load_conversations(locomo), model_dir, Path(tmp), weight)
            if chats is not None:
                asked += ask_chats(chats, model_dir, Path(tmp), weight)
        by_weight[weight] = asked
    if asked_file is not None:
        asked_file.write_bytes(pickle.dumps(by_weight))
    report = cross_validate({w: a for w, a in by_weight.items() if w in {shipped_weight, *weights}})
    asked = by_weight[shipped_weight]
    shipped = Gate(round(calibration_for(LOCAL_MODEL_NAME).z_at(0.65), 2), FLOOR_MARGIN, MARGIN)
    report["shipped"] = shipped.__dict__
    report["live"] = {name: score([a for a in asked if a.set == name], shipped).row()
                      for name in sorted({a.set for a in asked})}
    if chats is not None:
        try:
            report["late_facts"] = late_facts(chats, model_dir)
        except (ImportError, AttributeError):  # a checkout from before passages and these questions
            pass
    return report


def late_facts(chats: Path, model_dir: Path) -> dict[str, dict[str, float | None]]:
    """The late-fact questions (tests/support/late_facts.py: a fact past the model's first window
    of a long answer), asked of chats-dev plus those answers, with the passage vectors and
    without them: the share ranked first and the share admitted."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from recall_chats import load_chats
    from tests.support.late_facts import late_fact_exchanges, late_fact_questions

    from ocat.config.loading import load_settings
    from ocat.memory import MemoryStore, RetrievalLimits, StoreLocation, retrieve
    from smoke import threads
    from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder

    limits = RetrievalLimits.from_settings(load_settings(env={}).vector_store)
    exchanges, _ = load_chats(chats)
    out: dict[str, dict[str, float | None]] = {}
    with tempfile.TemporaryDirectory(prefix="ocat-late-") as tmp:
        store = MemoryStore.open(StoreLocation(path=Path(tmp)), OnnxMiniLMEmbedder(model_dir, threads=threads()), name="eval")
        store.add_exchanges([*exchanges, *late_fact_exchanges()])
        store.wait_for_passages()
        for label in ("with passages", "without"):
            if label == "without":
                store.prompts.delete_passages()
            first, admitted = [], []
            for question, target in late_fact_questions():
                hits = retrieve(store, question, limits)
                first.append(bool(hits) and hits[0].id == target)
                admitted.append(any(h.id == target and h.admitted for h in hits))
            out[label] = {"first": _pct(first), "admitted": _pct(admitted)}
        store.close()
    return out
