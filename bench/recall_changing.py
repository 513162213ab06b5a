"""Facts that change: what a chat's automatic recall gives for questions about a value that changed.

changing-dev (../shared/eval/changing-dev, its README) is one user's chats in which 36 facts
change once or more; its questions ask a fact's current value (`current`), an earlier value or
the change itself (`history`), a fact that never changed (`stable`), or something never
discussed (`offtopic`, `near`). All exchanges go into one fresh store; each question is asked
from a new chat on 2025-08-01, and what passes the gate (within the memory token budget) is
what the chat would give the model.

    python bench/recall_changing.py                  # the table of issue 45, on changing-dev
    python bench/recall_changing.py --folds          # the same, with links fitted on other folds
    python bench/recall_changing.py --links          # how well the link finder finds the versions
    python bench/recall_changing.py --why            # each missed question's hits, in /vquery's words
    python bench/recall_changing.py --json
    python bench/recall_changing.py --consolidate    # memory.consolidate: model, with a judge that is always right
    python bench/recall_changing.py --data ../shared/eval/chats-dev   # its 10 questions about a changed fact

The figures (docs/RETRIEVAL.md, "Facts that change"):
- current reached: a target (the newest version, or a later restatement of it) passes;
- outdated alone: a superseded version passes and no target does (the model is told an old value);
- old beside new: both pass;
- history / stable: a target passes;
- quiet: nothing passes (off-topic and near questions).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable
from zoneinfo import ZoneInfo

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import smoke  # noqa: E402
from recall_chats import CHATS_NOW, bench_settings, load_chats, pct  # noqa: E402

DEFAULT_SET = REPO.parent / "shared" / "eval" / "changing-dev"
DEFAULT_CHATS = REPO.parent / "shared" / "eval" / "chats-dev"
DEFAULT_MODEL = REPO.parent / "shared" / "models" / "all-MiniLM-L6-v2-int8"
# The README's protocol: questions asked after the last exchange, in the user's zone (Lisbon).
CHANGING_NOW = datetime(2025, 8, 1, 12, 0, tzinfo=ZoneInfo("Europe/Lisbon"))


@dataclass
class Outcome:
    """What the gate gave for one question."""

    id: str
    facet: str  # current, history, stable, offtopic, near
    shown: list[str]
    top5: list[str]
    targets: set[str]
    superseded: set[str]
    fold: str = ""

    @property
    def reached(self) -> bool:
        return bool(self.targets & set(self.shown))

    @property
    def stale(self) -> bool:
        return bool(self.superseded & set(self.shown))

    @property
    def missed(self) -> bool:
        """A recall question whose target is not given, or a quiet one given something."""
        if self.facet in ("offtopic", "near"):
            return bool(self.shown)
        return not self.reached


@dataclass
class Table:
    """The issue's table over a list of outcomes."""

    outcomes: list[Outcome] = field(default_factory=list)

    def of(self, *facets: str) -> list[Outcome]:
        return [o for o in self.outcomes if o.facet in facets]

    def row(self) -> dict[str, Any]:
        current = self.of("current")
        return {
            "current_reached": pct([o.reached for o in current]),
            "current_top5": pct([bool(o.targets & set(o.top5)) for o in current]),
            "outdated_alone": pct([o.stale and not o.reached for o in current]),
            "old_beside_new": pct([o.stale and o.reached for o in current]),
            "history": pct([o.reached for o in self.of("history")]),
            "stable": pct([o.reached for o in self.of("stable")]),
            "quiet": pct([not o.shown for o in self.of("offtopic", "near")]),
            "quiet_offtopic": pct([not o.shown for o in self.of("offtopic")]),
            "quiet_near": pct([not o.shown for o in self.of("near")]),
            "questions": {f: len(self.of(f)) for f in ("current", "history", "stable", "offtopic", "near")},
        }


def folds_of(folder: Path, questions: list[dict[str, Any]]) -> dict[str, str]:
    """Each question's fold: the month the thread of its first target (or, for a near question,
    of the exchange it sits next to) started, in four groups; off-topic questions round-robin."""
    started: dict[str, str] = {}
    for line in (folder / "index.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        cells = line.split("\t")
        started.setdefault(cells[2], cells[4][5:7])
    thread_of = {line.split("\t")[1]: line.split("\t")[2]
                 for line in (folder / "index.tsv").read_text(encoding="utf-8").splitlines()[1:]}
    folds: dict[str, str] = {}
    spare = 0
    for q in questions:
        refs = q["targets"] or q.get("related") or []
        if refs:
            folds[q["id"]] = FOLDS.get(started[thread_of[refs[0]]], "May-Jul")
        else:
            folds[q["id"]] = FOLD_ORDER[spare % len(FOLD_ORDER)]
            spare += 1
    return folds


# Months of a thread's start, grouped into four folds of 6-9 threads.
FOLDS = {"01": "Jan", "02": "Feb", "03": "Mar-Apr", "04": "Mar-Apr", "05": "May-Jul", "06": "May-Jul", "07": "May-Jul"}
FOLD_ORDER = ("Jan", "Feb", "Mar-Apr", "May-Jul")
# What --folds fits: the finder's subject threshold and candidates, the retrieval's lift, how
# far under the gate a version that a newer one updates may stand, and the lift of the newer of
# the memories found for a question about now (ocat.memory.retrieval.recency).
SUBJECTS = (0.45, 0.50, 0.55)
CANDIDATES = (2,)
LIFTS = (0.0, 0.10, 0.15)
EASES = (0.0, 0.05, 0.10, 0.15)
RECENTS = (0.0, 0.15)


def score(row: dict[str, Any]) -> float:
    """What the fit maximises: every facet's figure, an outdated version alone counted three times
    against (the worst outcome: a confidently wrong answer)."""
    return (row["current_reached"] or 0) - 3 * (row["outdated_alone"] or 0) + (row["history"] or 0) \
        + (row["stable"] or 0) + (row["quiet"] or 0)


def linked_copy(base: Path, tmp: Path, embedder: Any, subject: float, candidates: int) -> Any:
    """A copy of an unlinked store with links found as a write would find them (every exchange
    at once, oldest first), under these finder constants."""
    import shutil

    from ocat.memory import MemoryStore, StoreLocation
    from ocat.memory.storage import version_finder as finder

    target = tmp / f"linked-{subject}-{candidates}"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(base, target)
    store = MemoryStore.open(StoreLocation(path=target), embedder, name="eval")
    got = store.collection("exchange").get(include=["embeddings", "metadatas", "documents"])
    rows = sorted(zip(got["ids"], got["documents"], got["metadatas"]), key=lambda r: float(r[2]["timestamp"]))
    vectors = {i: v for i, v in zip(got["ids"], got["embeddings"])}
    prompts = store.prompts.vectors([r[0] for r in rows])
    saved = finder.SUBJECT, finder.CANDIDATES, finder.NEIGHBOURS
    finder.SUBJECT, finder.CANDIDATES, finder.NEIGHBOURS = subject, candidates, len(rows)
    try:
        links = finder.find_links(store, rows, [vectors[r[0]] for r in rows], [prompts.get(r[0]) for r in rows])
        finder.record_links(store, links)
    finally:
        finder.SUBJECT, finder.CANDIDATES, finder.NEIGHBOURS = saved
    return store


def cross_validate(folder: Path, model_dir: Path, tmp: Path) -> dict[str, Any]:
    """Every figure on folds of questions the constants were not fitted on, pooled; and the fit on all."""
    from ocat.memory import MemoryStore, StoreLocation
    from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder
    from ocat.memory.retrieval import follow_versions as follow
    from ocat.memory.retrieval import recency

    embedder = OnnxMiniLMEmbedder(model_dir, threads=smoke.threads())
    exchanges, questions = load_chats(folder)
    base = tmp / "base"
    store = MemoryStore.open(StoreLocation(path=base), embedder, name="eval")
    store.link_versions = False
    store.add_exchanges(exchanges)
    store.wait_for_passages()
    store.close()
    folds = folds_of(folder, questions)
    shipped_lift, shipped_ease, shipped_recent = follow.VERSION_LIFT, follow.VERSION_EASE, recency.RECENT_LIFT
    outcomes: dict[tuple[float, int, float, float, float], list[Outcome]] = {}
    for subject in SUBJECTS:
        for candidates in CANDIDATES:
            store = linked_copy(base, tmp, embedder, subject, candidates)
            for lift in LIFTS:
                for ease in EASES:
                    for recent in RECENTS:
                        follow.VERSION_LIFT, follow.VERSION_EASE, recency.RECENT_LIFT = lift, ease, recent
                        found = ask(store, questions, CHANGING_NOW)
                        for o in found:
                            o.fold = folds[o.id]
                        outcomes[(subject, candidates, lift, ease, recent)] = found
                        print(f"subject {subject} candidates {candidates} lift {lift} ease {ease} recent {recent}: "
                              f"{Table(found).row()}", file=sys.stderr)
            store.close()
    follow.VERSION_LIFT, follow.VERSION_EASE, recency.RECENT_LIFT = shipped_lift, shipped_ease, shipped_recent

    def smallest_first(c: tuple[float, int, float, float, float], rows: list[Outcome]) -> tuple[float, ...]:
        # Among equals, the smaller lifts and ease: the least change to the ranking and the gate.
        return score(Table(rows).row()), -c[2], -c[3], -c[4]

    held_out: list[Outcome] = []
    chosen = {}
    for fold in FOLD_ORDER:
        best = max(outcomes, key=lambda c: smallest_first(c, [o for o in outcomes[c] if o.fold != fold]))
        chosen[fold] = best
        held_out += [o for o in outcomes[best] if o.fold == fold]
    shipped = max(outcomes, key=lambda c: smallest_first(c, outcomes[c]))
    return {"held_out": Table(held_out).row(), "chosen": {f: list(c) for f, c in chosen.items()},
            "fit_on_all": list(shipped), "fit_on_all_row": Table(outcomes[shipped]).row()}


def facet_of(question: dict[str, Any]) -> str:
    """A question's facet; chats-dev has none: its questions with superseded versions ask a
    current value, its other recall questions count as stable."""
    if question.get("facet"):
        return str(question["facet"])
    if question["kind"] == "recall":
        return "current" if question.get("superseded") else "stable"
    return str(question["kind"])


def ask(store: Any, questions: list[dict[str, Any]], now: datetime) -> list[Outcome]:
    """Each question as a new chat's first turn: what passes the gate, and the top 5."""
    from ocat.memory import RetrievalLimits, admitted, retrieve
    from ocat.memory.retrieval.given import within_budget

    vector_store = bench_settings().vector_store
    limits = RetrievalLimits.from_settings(vector_store)
    outcomes = []
    for q in questions:
        hits = retrieve(store, q["question"], limits, now=now)
        shown = [h.id for h in within_budget(admitted(hits), vector_store.memory_token_budget)]
        outcomes.append(Outcome(
            id=q["id"], facet=facet_of(q), shown=shown, top5=[h.id for h in hits[:5]],
            targets=set(q["targets"]), superseded=set(q.get("superseded") or []),
        ))
    return outcomes


def why(store: Any, questions: list[dict[str, Any]], outcomes: list[Outcome], now: datetime, text: dict[str, str],
        top: int = 8) -> str:
    """Each missed question's hits, as the chat ranks them, in the words `/vquery` gives them
    (given or not, and why), the targets (T) and outdated versions (S) marked, and where a
    target ranks when it is not among the first `top`: what to read before changing anything."""
    from ocat.memory import RetrievalLimits, retrieve
    from ocat.operations.search import reasons

    limits = RetrievalLimits.from_settings(bench_settings().vector_store, results=2 * top)
    by_id = {q["id"]: q for q in questions}
    lines = []
    for o in (o for o in outcomes if o.missed):
        hits = retrieve(store, by_id[o.id]["question"], limits, now=now)
        lines.append(f"{o.id} [{o.facet}] {by_id[o.id]['question']}")
        for n, (hit, said) in enumerate(zip(hits[:top], reasons(hits[:top])), start=1):
            mark = "T" if hit.id in o.targets else "S" if hit.id in o.superseded else " "
            given = "*" if hit.id in o.shown else " "
            lines.append(f"  {n}. {mark}{given} {hit.score:.2f} {hit.id[:8]} {text.get(hit.id, '')[:60]!r}  ({said})")
        ranked = [h.id for h in hits]
        for target in sorted(o.targets - set(ranked[:top])):
            where = f"ranked {ranked.index(target) + 1}" if target in ranked else f"not among the first {2 * top}"
            lines.append(f"  target {target[:8]} {where}: {text.get(target, '')[:60]!r}")
    lines.append(f"{sum(o.missed for o in outcomes)} of {len(outcomes)} questions missed "
                 "(T a target, S an outdated version, * given to the model)")
    return "\n".join(lines)


def open_store(folder: Path, model_dir: Path, tmp: Path) -> tuple[Any, list[dict[str, Any]], list[Any]]:
    """A fresh store holding the set's exchanges (written oldest first, as they were made)."""
    from ocat.memory import MemoryStore, StoreLocation
    from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder

    exchanges, questions = load_chats(folder)
    store = MemoryStore.open(StoreLocation(path=tmp / folder.name), OnnxMiniLMEmbedder(model_dir, threads=smoke.threads()), name="eval")
    store.add_exchanges(exchanges)
    store.wait_for_passages()
    return store, questions, exchanges


def gold_links(folder: Path) -> set[tuple[str, str]]:
    """(older, newer) exchange-id pairs of the README's table of changing facts."""
    index = {}
    for line in (folder / "index.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        cells = line.split("\t")
        index[cells[0]] = cells[1]
    pairs: set[tuple[str, str]] = set()
    for line in (folder / "README.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("| ") and "→" in line:
            keys = re.findall(r"`(t\d\d-e\d\d)`", line)
            pairs.update((index[a], index[b]) for a, b in zip(keys, keys[1:]) if a != b)
    return pairs


def later_versions(gold: set[tuple[str, str]]) -> Callable[[str], set[str]]:
    """Every later version of an exchange's fact, as the README's table of versions links them."""
    later: dict[str, set[str]] = {}
    for older, newer in gold:
        later.setdefault(older, set()).add(newer)

    def onwards(key: str) -> set[str]:
        seen: set[str] = set()
        todo = [key]
        while todo:
            for n in later.get(todo.pop(), ()):
                if n not in seen:
                    seen.add(n)
                    todo.append(n)
        return seen

    return onwards


def link_quality(store: Any, folder: Path) -> dict[str, Any]:
    """How the links a store holds compare with the README's table of versions: each found link is
    right (a pair of the table), a chain (its newer exchange is a later version of the same fact,
    reached through another) or wrong; and the table's pairs no link makes."""
    gold = gold_links(folder)
    onwards = later_versions(gold)
    key = {}
    for line in (folder / "index.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        cells = line.split("\t")
        key[cells[1]] = cells[0]
    found = {(i, str(m["updated_by"])): str(m.get("update_evidence") or "")
             for i, m in store.iter_metadata("exchange") if m.get("updated_by")}
    verdicts = {pair: "right" if pair in gold else "chain" if pair[1] in onwards(pair[0]) else "wrong" for pair in found}
    listed = [{"older": key.get(o, o), "newer": key.get(n, n), "verdict": verdicts[(o, n)], "evidence": found[(o, n)]}
              for o, n in sorted(found, key=lambda p: key.get(p[0], p[0]))]
    missed = sorted((key.get(o, o), key.get(n, n)) for o, n in gold - set(found))
    counts = {v: sum(1 for x in verdicts.values() if x == v) for v in ("right", "chain", "wrong")}
    return {"links": len(found), **counts, "in_readme": len(gold), "missed": len(missed),
            "listed": listed, "missed_pairs": [f"{o} -> {n}" for o, n in missed]}


def consolidate_right(store: Any, folder: Path) -> dict[str, Any]:
    """`memory.consolidate: model` over every exchange, oldest first, with a judge that answers as
    the README's table of versions says: the most a model's checks can give the links, and what
    they cost (checks made, tokens asked per check, counted as the chat model's tokenizer would)."""
    from statistics import median

    from ocat.memory import apply_verdict, check_for, messages_for
    from ocat.memory.consolidate import Change
    from ocat.text.tokens import count_tokens

    gold = gold_links(folder)
    onwards = later_versions(gold)
    rows = sorted(store.iter_metadata("exchange"), key=lambda r: float(r[1]["timestamp"]))
    tokens = []
    for exchange_id, _ in rows:
        check = check_for(store, exchange_id)
        if check is None:
            continue
        tokens.append(sum(count_tokens(m["content"]) for m in messages_for(check)))
        right = [Change(n, "as the README says") for n, e in enumerate(check.earlier, 1) if exchange_id in onwards(e.id)]
        apply_verdict(store, check, right)
    linked = {(i, m["updated_by"]) for i, m in store.iter_metadata("exchange") if m.get("updated_by")}
    return {"exchanges": len(rows), "checks": len(tokens), "median_tokens_per_check": median(tokens) if tokens else 0,
            "links": len(linked), "links_right": len(linked & gold), "links_in_readme": len(gold)}


def main(argv: list[str] | None = None) -> int:
    """Print the table (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_SET)
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--folds", action="store_true", help="cross-validate the constants over months")
    parser.add_argument("--show", action="store_true", help="list each question's outcome")
    parser.add_argument("--why", action="store_true",
                        help="each missed question's hits, in /vquery's words, targets and outdated versions marked")
    parser.add_argument("--links", action="store_true",
                        help="how the links found compare with the README's table of versions (changing-dev)")
    parser.add_argument("--consolidate", action="store_true",
                        help="check every exchange's links as memory.consolidate: model would, with a judge always right")
    smoke.add_flag(parser)
    args = parser.parse_args(argv)
    smoke.start(args.smoke)
    with tempfile.TemporaryDirectory(prefix="ocat-changing-") as tmp:
        if args.folds:
            result = cross_validate(args.data, args.model, Path(tmp))
            print(json.dumps(result, indent=2))
            return 0
        store, questions, exchanges = open_store(args.data, args.model, Path(tmp))
        checked = consolidate_right(store, args.data) if args.consolidate else {}
        quality = link_quality(store, args.data) if args.links else {}
        now = CHATS_NOW if args.data.name.startswith("chats") else CHANGING_NOW
        table = Table(ask(store, questions, now))
        if args.why:
            prompts = {e.exchange_id: e.user_prompt for e in exchanges}
            print(why(store, questions, table.outcomes, now, prompts))
        links = sum(1 for _, m in store.iter_metadata("exchange") if m.get("updated_by"))
        store.close()
    row = table.row() | {"linked_exchanges": links} | ({"consolidated": checked} if checked else {})
    if quality:
        print(json.dumps(quality, indent=2) if args.json else _links_table(quality))
        return 0
    if args.show:
        for o in table.outcomes:
            print(o.id, o.facet, "reached" if o.reached else "-", "stale" if o.stale else "", len(o.shown))
    print(json.dumps(row, indent=2) if args.json else row)
    return 0


def _links_table(quality: dict[str, Any]) -> str:
    """The link finder's links, one a line, then the README's pairs it missed."""
    lines = [f"{q['verdict']:5}  {q['older']} -> {q['newer']}  {q['evidence']}" for q in quality["listed"]]
    lines += [f"missed {pair}" for pair in quality["missed_pairs"]]
    lines.append(f"links {quality['links']}: right {quality['right']}, chain {quality['chain']}, wrong {quality['wrong']}; "
                 f"the README's pairs {quality['in_readme']}, missed {quality['missed']}")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
