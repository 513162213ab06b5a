"""The gate, given tools: does a stricter automatic gate, with the model searching for itself, serve users better?

For every question of locomo-dev and chats-dev (stores, folds and evidence as bench/recall_folds.py
asks them), one turn of a new chat is simulated:

1. **Automatic recall**, as `ChatSession.recall` gives it: the admitted hits of the chat's top 5,
   within the memory token budget. Each gate of a small grid is replayed on the question's ranked
   hits (`recall_folds.Gate.shown`, the chat's rule); the shipped gate's replay is checked against
   the live call (`within_budget(admitted(...))` on the same search) and mismatches are counted.
2. **A simulated model** with an oracle judge (it knows from the evidence labels whether a memory
   is relevant; the real model judges relevance far better than a score, which is the point).
   When nothing injected is relevant it calls `search_memory` with the question, through the real
   tool path (`MemoryToolContext`, `ToolBox.run`: formatting, marking what is already in context,
   the result budget); when the question names a calendar time ("in June", "on 7 July, 2023",
   "the week before August 3, 2023", "last year") it also calls it with `after`/`before`.
   `ocat.memory.retrieval.time_range` (issue 30, item 4) is not in this branch, so the range comes
   from `question_range` below: explicit calendar words resolved against the day the questions
   are asked (the day after the store's last exchange). Off-topic questions are not searched (the
   oracle knows them); what a search would cost there is reported as `off tok if searched`.

Figures per set and gate: `tool R@5` (evidence in the top 5 of the question's plain search, over
every recall question) and `R@5 called` (over the questions where the model searched); `reached`
(a relevant memory reaches the model: injected, or readable in a tool result); `injected` (by the
gate alone: the "admitted" of bench/recall.py); `precision` of injection; `calls` (share of recall
turns with a tool call, each a second model call); `tokens` per recall turn (the memory block as
`ocat.chat.messages.memory_message` writes it, plus each call's arguments and result) and `billed` (the
input of every model call of the turn: system prompt, question, memory block and the tools'
schemas, sent again with the calls and results when the model searched); `quiet` (off-topic;
chats-dev: off-topic and near) and `off tokens` (what an off-topic turn is injected).

Gates: today's shipped gate (point 0.70, floor margin 0.29, best margin 0.50, up to 5 memories) and
stricter ones: a higher point, a higher floor margin, a tighter best margin, fewer memories. A gate
is chosen by cross-validation over conversations (habit 17): for each held-out fold, the gate
with the best objective on everything else (`objective`: reached + quiet - tokens / 50, with
billed tokens and, apart, with the memory's context tokens), scored on the held-out fold.
docs/RETRIEVAL.md, "The gate, given tools", has the figures and what was decided.

    python bench/tool_recall.py --asked /tmp/tool-asked.pickle   # asks once (6-10 minutes), then replays
    python bench/tool_recall.py --asked /tmp/tool-asked.pickle --every-gate --json
"""

from __future__ import annotations

import argparse
import itertools
import json
import pickle
import re
import statistics
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

REPO = Path(__file__).resolve().parent.parent
for _path in (REPO, REPO / "bench"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import smoke  # noqa: E402
from recall_folds import FOLD_ORDER, Asked, Gate, Hit  # noqa: E402

# The gates compared: the shipped one is the first of each axis; every other is stricter.
POINTS = (0.70, 0.75, 0.80, 0.85, 0.90, 1.00, 1.10)
FLOOR_MARGINS = (0.29, 0.39, 0.49)
BEST_MARGINS = (0.50, 0.35, 0.20)
MOST = (5, 3, 2, 1)


# Each gate's replay of each question, kept: the fit scores every gate many times.
_SHOWN: dict[tuple[int, ToolGate], tuple[Asked, list[Hit]]] = {}


@dataclass(frozen=True)
class ToolGate:
    """An automatic gate: recall_folds' three constants, and the most memories it injects."""

    point: float
    floor_margin: float
    best_margin: float
    most: int = 5

    def shown(self, asked: Asked) -> list[Hit]:
        """What this gate injects for a question (the chat's rule, replayed on its ranked hits)."""
        kept = _SHOWN.get((id(asked), self))
        if kept is None or kept[0] is not asked:  # an id is only unique among live objects
            kept = _SHOWN[(id(asked), self)] = (asked, Gate(self.point, self.floor_margin, self.best_margin)
                                                .shown(asked, reach=self.most))
        return kept[1]

    @property
    def label(self) -> str:
        """'0.70/0.29/0.50/5': point, floor margin, best margin, most memories."""
        return f"{self.point:.2f}/{self.floor_margin:.2f}/{self.best_margin:.2f}/{self.most}"


def grid() -> list[ToolGate]:
    """Every gate compared, the shipped one first."""
    return [ToolGate(*g) for g in itertools.product(POINTS, FLOOR_MARGINS, BEST_MARGINS, MOST)]


def shipped_gate() -> ToolGate:
    """The gate ocat ships, from its constants."""
    from ocat.config.loading import load_settings
    from ocat.memory.embedding.model_files import LOCAL_MODEL_NAME
    from ocat.memory.retrieval.verdicts import MARGIN
    from ocat.memory.retrieval.store_floor import FLOOR_MARGIN
    from ocat.memory.storage.scoring import calibration_for

    settings = load_settings(env={}).vector_store
    point = round(calibration_for(LOCAL_MODEL_NAME).z_at(settings.similarity_threshold), 2)
    return ToolGate(point, FLOOR_MARGIN, MARGIN, settings.context_results)


# -- the simulated model's searches ------------------------------------------------------------


@dataclass(frozen=True)
class Searched:
    """One search_memory call as the model got it."""

    ids: tuple[str, ...]  # the results, best first
    top5: frozenset[str]  # the evidence the first 5 results cover (the tool's R@5)
    covers: frozenset[str]  # the evidence covered by results the model can read in the text
    tokens: int  # the call's arguments and its result, as the model reads them
    # Results the result budget cut away (ToolBox), and whether a readable result that covers
    # evidence is shown whole (not shortened to its share of the budget).
    dropped: int = 0
    whole: bool = False


@dataclass
class Case:
    """One question asked of one store: the automatic recall's ranked hits, the tokens each would
    take in the memory block, the question's time range, and the model's searches, by the ids
    already in its context (the gate decides those)."""

    asked: Asked
    block: dict[str, int]
    preamble: int
    prompt: int  # the question's tokens
    dated: tuple[str, str] | None = None
    plain: dict[frozenset[str], Searched] = field(default_factory=dict)
    ranged: dict[frozenset[str], Searched] = field(default_factory=dict)
    live_matches: bool = True  # the shipped gate's replay injects what the live call injects


def relevant(shown: Sequence[Hit]) -> bool:
    """The oracle: whether anything injected covers the question's evidence."""
    return any(h.found for h in shown)


_MONTHS = {m: n for n, m in enumerate(
    ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"), start=1)}
_MONTH = r"(january|february|march|april|may|june|july|august|september|october|november|december)"
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}}) {_MONTH},? (\d{{4}})\b", re.I)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH} (\d{{1,2}}),? (\d{{4}})\b", re.I)
_MONTH_YEAR = re.compile(rf"\b{_MONTH},? (\d{{4}})\b", re.I)
_IN_MONTH = re.compile(rf"\bin {_MONTH}\b", re.I)
_IN_YEAR = re.compile(r"\bin (\d{4})\b", re.I)
_WEEKS_BEFORE = re.compile(r"\b(?:(two|three|\d+) )?weeks? before\b|\bweekend before\b", re.I)


def question_range(question: str, asked_on: datetime) -> tuple[str, str] | None:
    """The dates a model would give search_memory for a question that names a calendar time, as
    ISO dates (after, before: before is exclusive), or None. A stand-in for the parser of issue 30,
    item 4: explicit dates, months and years, "last year" and "this year", resolved against
    `asked_on`; "ago", "recently" and "last weekend" are not resolved."""
    text = question.lower()
    day: datetime | None = None
    if (m := _DAY_MONTH_YEAR.search(text)) is not None:
        day = datetime(int(m.group(3)), _MONTHS[m.group(2)], int(m.group(1)))
    elif (m := _MONTH_DAY_YEAR.search(text)) is not None:
        day = datetime(int(m.group(3)), _MONTHS[m.group(1)], int(m.group(2)))
    if day is not None:
        before = _WEEKS_BEFORE.search(text[: m.start()]) if m is not None else None
        if before is not None:  # "two weeks before August 11": that stretch, and the day itself
            said = before.group(1) or "1"
            weeks = int(said) if said.isdigit() else {"two": 2, "three": 3}[said]
            return _iso(day - timedelta(weeks=weeks)), _iso(day + timedelta(days=1))
        return _iso(day), _iso(day + timedelta(days=1))
    if (m := _MONTH_YEAR.search(text)) is not None:
        return _month(int(m.group(2)), _MONTHS[m.group(1)])
    if (m := _IN_MONTH.search(text)) is not None:
        month = _MONTHS[m.group(1)]
        year = asked_on.year if month <= asked_on.month else asked_on.year - 1  # the latest such month
        return _month(year, month)
    if (m := _IN_YEAR.search(text)) is not None:
        return f"{m.group(1)}-01-01", f"{int(m.group(1)) + 1}-01-01"
    if "last year" in text:
        return f"{asked_on.year - 1}-01-01", f"{asked_on.year}-01-01"
    if "this year" in text:
        return f"{asked_on.year}-01-01", f"{asked_on.year + 1}-01-01"
    return None


def _iso(day: datetime) -> str:
    return day.date().isoformat()


def _month(year: int, month: int) -> tuple[str, str]:
    after = datetime(year, month, 1)
    return _iso(after), _iso(datetime(year + (month == 12), month % 12 + 1, 1))


@contextmanager
def searches_kept() -> Iterator[dict[Any, Any]]:
    """The search_memory tool's search (`ocat.operations.search.search`, patched where the tool
    reads it) remembers what it found for the same store, query and options while this runs: the
    tool is run for every gate's context with one search each."""
    import ocat.tools.memory_tools as searching

    original = searching.search
    kept: dict[Any, Any] = {}

    def search(stores: Any, query: str, settings: Any, **options: Any) -> Any:
        # Every option the caller gives is passed on and is part of the key, whatever the
        # search learns next (it once learned `project`, and a stand-in that named its options failed).
        key = (tuple(id(s) for s in stores), query, repr(sorted(options.items())))
        if key not in kept:
            kept[key] = original(stores, query, settings, **options)
        return kept[key]

    searching.search = search  # type: ignore[assignment]
    try:
        yield kept
    finally:
        searching.search = original  # type: ignore[assignment]


def call_tool(store: Any, settings: Any, arguments: dict[str, Any], in_context: frozenset[str],
              covers: Callable[[str], set[str]]) -> Searched:
    """Run search_memory as a turn does (ToolBox.run), and what the model can read of its result."""
    from ocat.text.tokens import count_tokens, estimate_tokens
    from ocat.tools import ToolBox, ToolCall
    from ocat.tools.memory_tools import MemoryToolContext, memory_tools

    context = MemoryToolContext(store, settings, in_context=set(in_context))
    box = ToolBox(memory_tools(context), result_tokens=settings.tools.result_tokens, count=estimate_tokens)
    call = box.run(ToolCall(id="call_0", name="search_memory", arguments=json.dumps(arguments)))
    if call.error is not None:
        raise RuntimeError(f"search_memory failed in the bench: {call.error}")
    readable = _readable(call.result, call.ids)
    top5 = frozenset().union(*(covers(i) for i in call.ids[:5])) if call.ids else frozenset()
    seen = [i for i in readable if i not in in_context]
    found = frozenset().union(*(covers(i) for i in seen)) if seen else frozenset()
    answering = [i for i in seen if covers(i)]
    texts = store.fetch("exchange", answering, vectors=False)["documents"] if answering else []
    whole = any(t and t in call.result for t in texts)
    return Searched(call.ids, top5, found, count_tokens(call.result) + count_tokens(call.arguments),
                    len(call.ids) - len(readable), whole)


def _readable(text: str, ids: Sequence[str]) -> list[str]:
    """The results whose entry the (bounded) text still holds: entries begin '[n] id ...'."""
    shown = {int(m.group(1)) for m in re.finditer(r"^\[(\d+)\] id ", text, re.M)}
    return [i for n, i in enumerate(ids, start=1) if n in shown]


def simulate(cases: list[Case], gates: Sequence[ToolGate], settings: Any, anchors: dict[str, datetime],
             shipped: ToolGate) -> Callable[[Any, dict[str, Any], Asked, Callable[[str], set[str]]], None]:
    """The hook recall_folds calls with each question asked: the model's searches for every
    context the gates can leave it, appended to `cases`."""
    from ocat.chat.messages import MEMORY_PREAMBLE, memory_message
    from ocat.memory import admitted
    from ocat.memory.retrieval.filters import Filters
    from ocat.memory.retrieval.given import within_budget
    from ocat.operations.search import search
    from ocat.text.tokens import count_tokens

    preamble = count_tokens(MEMORY_PREAMBLE)

    def also(store: Any, q: dict[str, Any], asked: Asked, covers: Callable[[str], set[str]]) -> None:
        question = q["question"]
        dated = question_range(question, anchors[asked.set if asked.set == "chats" else asked.fold])
        plain_args = {"query": question}
        ranged_args = {"query": question, "after": dated[0], "before": dated[1]} if dated else {}
        first = call_tool(store, settings, plain_args, frozenset(), covers)
        # The same search the tool ran (kept): a new chat's automatic recall is its admitted top 5.
        found = search([store], question, settings.vector_store, count=settings.vector_store.context_results,
                       filters=Filters())
        live = within_budget(admitted(found.hits), settings.vector_store.memory_token_budget)
        block = {h.id: count_tokens(memory_message([h])["content"]) - preamble for h in found.hits}  # type: ignore[index]
        matches = {h.id for h in live} == {h.id for h in shipped.shown(asked)}
        case = Case(asked, block, preamble, count_tokens(question), dated, live_matches=matches)
        case.plain[frozenset()] = first
        if dated is not None:
            case.ranged[frozenset()] = call_tool(store, settings, ranged_args, frozenset(), covers)
        # Off-topic questions are not searched (the oracle knows them): their first search, above,
        # only says what searching anyway would cost.
        contexts = {frozenset(h.id for h in gate.shown(asked)) for gate in gates} if asked.kind == "recall" else set()
        for in_context in sorted(contexts, key=sorted):
            shown = [h for h in asked.hits if h.id in in_context]
            if relevant(shown):
                continue  # the model has what it needs: no call
            if in_context not in case.plain:
                case.plain[in_context] = call_tool(store, settings, plain_args, in_context, covers)
            if dated is not None and in_context not in case.ranged:
                case.ranged[in_context] = call_tool(store, settings, ranged_args, in_context, covers)
        cases.append(case)

    return also


def ask(locomo: Path | None, chats: Path | None, model_dir: Path, gates: Sequence[ToolGate]) -> list[Case]:
    """Ask every question of both sets once, with every search the model would make."""
    from recall import load_conversations
    from recall_chats import load_chats
    from recall_folds import ask_chats, ask_locomo

    from ocat.config.loading import load_settings

    settings = load_settings(env={})
    shipped = shipped_gate()
    cases: list[Case] = []
    anchors: dict[str, datetime] = {}
    with tempfile.TemporaryDirectory(prefix="ocat-tool-recall-") as tmp, searches_kept():
        if locomo is not None:
            conversations = load_conversations(locomo)
            for conv in conversations:
                anchors[conv.sample_id] = _day_after(max(e.timestamp for e in conv.exchanges))
            ask_locomo(conversations, model_dir, Path(tmp), also=simulate(cases, gates, settings, anchors, shipped))
        if chats is not None:
            exchanges, _ = load_chats(chats)
            anchors["chats"] = _day_after(max(e.timestamp for e in exchanges))
            ask_chats(chats, model_dir, Path(tmp), also=simulate(cases, gates, settings, anchors, shipped))
    return cases


def _day_after(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp) + timedelta(days=1)


# -- the figures -------------------------------------------------------------------------------


def _pct(values: Sequence[float] | Sequence[bool]) -> float | None:
    return round(100 * sum(values) / len(values), 1) if values else None


def _mean(values: Sequence[float]) -> float | None:
    return round(statistics.fmean(values), 1) if values else None


def injected_tokens(case: Case, shown: Sequence[Hit]) -> int:
    """Tokens of the memory block for these memories (none: no block)."""
    return case.preamble + sum(case.block.get(h.id, h.tokens) for h in shown) if shown else 0


@dataclass(frozen=True)
class Costs:
    """What every model call of a turn is sent besides memory: the system prompt, and the tools'
    schemas when tools are offered (a new chat: no history; the wake block left out)."""

    system: int
    schemas: int


# Tokens a chat format adds per message (role and separators), as ocat.chat.messages.build_request counts them.
MESSAGE_TOKENS = 4


@dataclass(frozen=True)
class Outcome:
    """One question's turn under one gate: what was injected, whether the model searched, what
    reached it and what the turn cost (`tokens`: the memory block and the tool calls' results, the
    context memory adds; `billed`: the input of every model call of the turn, as a turn with a tool
    call sends its messages again, with the call and its result, in a second call)."""

    shown: int
    right: int
    injected: bool  # a relevant memory was injected
    called: bool
    reached: bool
    tokens: float
    billed: float
    called_r5: float | None = None
    whole: bool | None = None  # reached through the tool, and shown whole
    cut: bool | None = None  # the tool's result budget cut results away


_OUTCOMES: dict[tuple[int, ToolGate, Costs, bool], tuple[Case, Outcome]] = {}


def outcome(case: Case, gate: ToolGate, costs: Costs, tools: bool = True) -> Outcome:
    """The turn of `case` under `gate`, with the model's searches (or without tools); kept, as the
    fit asks for each many times."""
    kept = _OUTCOMES.get((id(case), gate, costs, tools))
    if kept is not None and kept[0] is case:
        return kept[1]
    a = case.asked
    shown = gate.shown(a)
    block = injected_tokens(case, shown)
    sent = costs.system + case.prompt + block + (costs.schemas if tools else 0) + MESSAGE_TOKENS * (2 + bool(shown))
    got = relevant(shown)
    called = tools and a.kind == "recall" and not got
    result = Outcome(len(shown), sum(h.right for h in shown), got, called, got, float(block), float(sent))
    if called:
        key = frozenset(h.id for h in shown)
        made = [s for s in (case.plain[key], case.ranged.get(key)) if s is not None]
        reached = any(s.covers for s in made)
        results = sum(s.tokens + 2 * MESSAGE_TOKENS for s in made)
        # The second call: everything again, with the calls and their results.
        result = Outcome(result.shown, result.right, False, True, reached, block + results, 2 * sent + results,
                         len(made[0].top5) / a.need, any(s.whole for s in made if s.covers) if reached else None,
                         any(s.dropped for s in made))
    _OUTCOMES[(id(case), gate, costs, tools)] = (case, result)
    return result


def score(cases: Sequence[Case], gate: ToolGate, costs: Costs, *, tools: bool = True) -> dict[str, float | None]:
    """The figures of some questions under one gate, with the model's searches or without tools."""
    recall = [c for c in cases if c.asked.kind == "recall"]
    turns = [outcome(c, gate, costs, tools) for c in recall]
    quiet = {kind: [not outcome(c, gate, costs, tools).shown for c in cases if c.asked.kind == kind]
             for kind in ("offtopic", "near")}
    off = [c for c in cases if c.asked.kind != "recall"]
    off_tokens = [outcome(c, gate, costs, tools).tokens for c in off]
    searched = [c.plain[frozenset()].tokens + (c.ranged[frozenset()].tokens if c.dated else 0) for c in off]
    dated = [c for c in recall if c.dated]
    shown = sum(t.shown for t in turns)
    return {
        "tool R@5": _pct([len(c.plain[frozenset()].top5) / c.asked.need for c in recall]),
        "R@5 called": _pct([t.called_r5 for t in turns if t.called_r5 is not None]),
        "reached": _pct([t.reached for t in turns]),
        "injected": _pct([t.injected for t in turns]),
        "precision": round(100 * sum(t.right for t in turns) / shown, 1) if shown else None,
        "per q": round(shown / len(turns), 2) if turns else None,
        "calls": _pct([t.called for t in turns]),
        "tokens": _mean([t.tokens for t in turns]),
        "billed": _mean([t.billed for t in turns]),
        "quiet off": _pct(quiet["offtopic"]),
        "quiet near": _pct(quiet["near"]) if quiet["near"] else None,
        "off tokens": _mean(off_tokens),
        "off tok if searched": _mean([t + s for t, s in zip(off_tokens, searched)]),
        "dated q": len(dated),
        "dated R@5 plain": _pct([len(c.plain[frozenset()].top5) / c.asked.need for c in dated]),
        "dated R@5 ranged": _pct([len(c.ranged[frozenset()].top5) / c.asked.need for c in dated]),
        "found whole": _pct([t.whole for t in turns if t.whole is not None]),
        "calls cut": _pct([t.cut for t in turns if t.cut is not None]),
    }


# Tokens per turn worth one point of reach or quiet in the fit's objective (see `objective`), and
# the other rates the fit on all questions is also reported with.
TOKENS_PER_POINT = 50.0
OTHER_RATES = (25.0, 100.0, 200.0)
# What the objective counts as a turn's tokens: what the model is billed (every call's input), or
# only what memory adds to the context (the memory block and the tool results).
MEASURES = ("billed", "tokens")


def objective(cases: Sequence[Case], gate: ToolGate, costs: Costs, *, measure: str = "billed",
              rate: float = TOKENS_PER_POINT) -> float:
    """What the fit maximises, per set and summed: reached + quiet (chats-dev's quiet is the mean of
    off-topic and near) - the recall turn's `measure` in tokens / `rate`."""
    total = 0.0
    for name in {c.asked.set for c in cases}:
        row = score([c for c in cases if c.asked.set == name], gate, costs)
        quiet = [v for v in (row["quiet off"], row["quiet near"]) if v is not None]
        total += (row["reached"] or 0.0) + (statistics.fmean(quiet) if quiet else 0.0)
        total -= (row[measure] or 0.0) / rate
    return total


def fit(cases: Sequence[Case], gates: Sequence[ToolGate], costs: Costs, **how: Any) -> ToolGate:
    """The gate of `gates` with the best objective on `cases` (ties: the first, the laxest)."""
    return max(gates, key=lambda g: round(objective(cases, g, costs, **how), 6))


def cross_validate(cases: Sequence[Case], gates: Sequence[ToolGate], shipped: ToolGate, costs: Costs,
                   measure: str = "billed") -> dict[str, Any]:
    """Every fold of both sets: the shipped gate as it is (without tools and with them), and the gate
    fitted on everything else."""
    report: dict[str, Any] = {"measure": measure, "shipped": {}, "fitted": {}, "no tools": {}, "gates": {}}
    for name in sorted({c.asked.set for c in cases}):
        for fold in sorted({c.asked.fold for c in cases if c.asked.set == name}, key=FOLD_ORDER.index):
            held = [c for c in cases if c.asked.set == name and c.asked.fold == fold]
            rest = [c for c in cases if not (c.asked.set == name and c.asked.fold == fold)]
            chosen = fit(rest, gates, costs, measure=measure)
            report["gates"][f"{name}/{fold}"] = chosen.label
            report["shipped"].setdefault(name, {})[fold] = score(held, shipped, costs)
            report["no tools"].setdefault(name, {})[fold] = score(held, shipped, costs, tools=False)
            report["fitted"].setdefault(name, {})[fold] = score(held, chosen, costs)
    report["fit on all"] = fit(cases, gates, costs, measure=measure).label
    report["fit on all, other rates"] = {
        rate: fit(cases, gates, costs, measure=measure, rate=rate).label for rate in OTHER_RATES
    }
    return report


def summary(rows: dict[str, dict[str, float | None]]) -> dict[str, dict[str, float | None]]:
    """Mean and worst fold of every figure (worst: the lowest; for tokens and calls, the highest)."""
    keys = next(iter(rows.values())).keys()
    out: dict[str, dict[str, float | None]] = {"mean": {}, "worst": {}}
    for key in keys:
        values = [v for r in rows.values() if (v := r[key]) is not None]
        out["mean"][key] = round(statistics.fmean(values), 1) if values else None
        worse = max if key in LOWER_IS_BETTER else min
        out["worst"][key] = worse(values) if values else None
    return out


LOWER_IS_BETTER = ("calls", "tokens", "billed", "off tokens", "off tok if searched", "per q", "calls cut")
COLUMNS = ("tool R@5", "R@5 called", "reached", "injected", "precision", "per q", "calls", "tokens", "billed",
           "quiet off", "quiet near", "off tokens")
WHOLE_COLUMNS = (*COLUMNS, "off tok if searched", "dated R@5 plain", "dated R@5 ranged", "found whole", "calls cut")


def full_sets(cases: Sequence[Case], gates: Sequence[ToolGate], shipped: ToolGate, costs: Costs) -> dict[str, Any]:
    """Every gate on each whole set (no fit: for reading the trade-off, not for choosing)."""
    out: dict[str, Any] = {}
    for name in sorted({c.asked.set for c in cases}):
        mine = [c for c in cases if c.asked.set == name]
        out[name] = {"no tools (shipped gate)": score(mine, shipped, costs, tools=False)}
        out[name] |= {g.label: score(mine, g, costs) for g in gates}
    return out


def report(cases: Sequence[Case], gates: Sequence[ToolGate]) -> dict[str, Any]:
    """Everything the bench prints."""
    from ocat.chat.messages import system_prompt
    from ocat.config.loading import load_settings
    from ocat.text.tokens import count_tokens
    from ocat.tools.memory_tools import MemoryToolContext, memory_tools

    shipped = shipped_gate()
    settings = load_settings(env={})
    schemas = [s.schema() for s in memory_tools(MemoryToolContext(None, settings))]  # type: ignore[arg-type]
    costs = Costs(count_tokens(system_prompt(settings.llm, datetime.now())), count_tokens(json.dumps(schemas)))
    checked = [c.live_matches for c in cases]
    return {
        "shipped": shipped.label,
        "system tokens": costs.system,
        "schema tokens": costs.schemas,
        "replay matches live": f"{sum(checked)} of {len(checked)}",
        "dated questions": {name: sum(1 for c in cases if c.asked.set == name and c.asked.kind == "recall" and c.dated)
                            for name in sorted({c.asked.set for c in cases})},
        "cv": {measure: cross_validate(cases, gates, shipped, costs, measure) for measure in MEASURES},
        "full": full_sets(cases, gates, shipped, costs),
    }


def format_report(rep: dict[str, Any], *, every_gate: bool = False) -> str:
    """The tables: per set, per fold, the shipped gate without and with tools and the fitted one."""
    lines = [f"shipped gate {rep['shipped']} (point/floor margin/best margin/most); system prompt "
             f"{rep['system tokens']} and tool schemas {rep['schema tokens']} tokens per model call; replay of the "
             f"shipped gate matches the live call on {rep['replay matches live']} questions; dated recall questions "
             f"{rep['dated questions']}"]
    for measure, cv in rep["cv"].items():
        for name in cv["shipped"]:
            lines.append("")
            lines.append(f"{name}: cross-validated; fitted: the gate chosen on the other folds and the other set, "
                         f"objective reached + quiet - {measure}/{TOKENS_PER_POINT:g}")
            head = f"{'':<24}" + "".join(f"{c[:9]:>10}" for c in COLUMNS)
            lines += [head, "-" * len(head)]
            for arm in ("no tools", "shipped", "fitted"):
                rows = cv[arm][name]
                for fold, row in {**rows, **summary(rows)}.items():
                    label = f"{arm} {fold}"
                    lines.append(f"{label:<24}" + "".join(f"{'-' if row[c] is None else row[c]:>10}" for c in COLUMNS))
        lines.append("")
        lines.append(f"objective with {measure}: fitted per held-out fold: "
                     + ", ".join(f"{k} {v}" for k, v in cv["gates"].items()))
        lines.append(f"fit on all: {cv['fit on all']}; with other tokens per point: "
                     + ", ".join(f"{rate:g}: {label}" for rate, label in cv["fit on all, other rates"].items()))
    for name, rows in rep["full"].items():
        lines.append("")
        lines.append(f"{name}, whole set, every gate (no fit):")
        head = f"{'gate':<24}" + "".join(f"{c[:9]:>10}" for c in WHOLE_COLUMNS)
        lines += [head, "-" * len(head)]
        for label, row in rows.items():
            if not every_gate and label not in _read_gates(rep):
                continue
            lines.append(f"{label:<24}" + "".join(f"{'-' if row[c] is None else row[c]:>10}" for c in WHOLE_COLUMNS))
    return "\n".join(lines)


def _read_gates(rep: dict[str, Any]) -> set[str]:
    """The gates shown without --every-gate: no tools, shipped, what the folds chose, and one step
    along each axis from the shipped gate."""
    shipped = rep["shipped"]
    point, floor, best, most = shipped.split("/")
    along = {f"{p:.2f}/{floor}/{best}/{most}" for p in POINTS} | {f"{point}/{f:.2f}/{best}/{most}" for f in FLOOR_MARGINS}
    along |= {f"{point}/{floor}/{b:.2f}/{most}" for b in BEST_MARGINS} | {f"{point}/{floor}/{best}/{m}" for m in MOST}
    chosen = {label for cv in rep["cv"].values()
              for label in (cv["fit on all"], *cv["gates"].values(), *cv["fit on all, other rates"].values())}
    return {"no tools (shipped gate)", shipped, *chosen, *along}


def main(argv: list[str] | None = None) -> int:
    """Ask (or load the asked questions), then print the cross-validated and whole-set tables."""
    from recall import DEFAULT_DATA, DEFAULT_MODEL
    from recall_chats import DEFAULT_CHATS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo-style JSON file")
    parser.add_argument("--chats", type=Path, default=DEFAULT_CHATS, help="chats-dev style folder")
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL, help="all-MiniLM-L6-v2 ONNX folder")
    parser.add_argument("--sets", default="locomo,chats", help="comma-separated: locomo,chats")
    parser.add_argument("--asked", type=Path,
                        help="keep the questions asked (scores and the model's searches) in this file, and reuse it")
    parser.add_argument("--every-gate", action="store_true", help="list every gate of the grid on the whole sets")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    smoke.add_flag(parser)
    args = parser.parse_args(argv)
    smoke.start(args.smoke)
    sets = {s.strip() for s in args.sets.split(",") if s.strip()}
    gates = grid()
    if args.asked is not None and args.asked.is_file():
        cases = pickle.loads(args.asked.read_bytes())
    else:
        cases = ask(args.data if "locomo" in sets else None, args.chats if "chats" in sets else None, args.model, gates)
        if args.asked is not None:
            args.asked.write_bytes(pickle.dumps(cases))
    rep = report(cases, gates)
    print(json.dumps(rep, indent=2) if args.json else format_report(rep, every_gate=args.every_gate))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
