"""Retrieval evaluation on chats-dev: one user's chats with an assistant, through ocat's own retrieval.

Protocol and metrics of ../shared/eval/chats-dev/README.md: all exchanges in one fresh store,
every question asked from a new chat. What the chat would inject is what `ChatSession.recall`
injects: the admitted hits among `context_results`, within the memory token budget.

- R@k: share of a recall question's targets among the top k memories, averaged.
- admitted: share of recall questions with a target among the injected memories.
- precision: among injected memories (pooled over recall questions), the share that are a
  target or a superseded version of one; attached context counts as injected.
- quiet (offtopic, near): share of questions for which nothing is injected.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

REPO = Path(__file__).resolve().parent.parent
for _path in (REPO, REPO / "bench"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import smoke  # noqa: E402

DEFAULT_CHATS = REPO.parent / "shared" / "eval" / "chats-dev"
KS = (1, 3, 5, 10)
DIFFICULTIES = ("easy", "medium", "hard")
# When chats-dev's questions are asked (its README: "now" after the last exchange), in the
# user's zone: a question that names a time ("this year") is read from there.
CHATS_NOW = datetime(2025, 7, 1, 12, 0, tzinfo=ZoneInfo("America/Montreal"))
# The environment the benches read settings with: ocat's defaults, whatever the user's own
# environment says. `bench/recall.py --time off` adds OCAT_VECTOR_STORE_TIME_IN_PROMPT=false
# (the figures before a prompt's time was read).
SETTINGS_ENV: dict[str, str] = {}


def bench_settings() -> Any:
    """ocat's default settings, as the benches measure them (SETTINGS_ENV)."""
    from ocat.config.loading import load_settings

    return load_settings(env=dict(SETTINGS_ENV))


def pct(values: list[float] | list[bool]) -> float | None:
    """The mean of 0/1 (or share) values as a percentage with one decimal, None for none."""
    return round(100 * sum(values) / len(values), 1) if values else None


def load_chats(folder: Path) -> tuple[list[Any], list[dict[str, Any]]]:
    """The exchanges (oldest first) and the questions of a chats-dev style folder."""
    from ocat.records import Exchange

    exchanges = []
    for line in (folder / "exchanges.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            record.pop("kind", None)
            record.pop("thread_session_id", None)
            exchanges.append(Exchange.from_metadata(record))
    questions = json.loads((folder / "questions.json").read_text(encoding="utf-8"))
    exchanges = smoke.kept_threads(exchanges)
    return exchanges, smoke.kept_questions(questions, {e.exchange_id for e in exchanges})


@dataclass
class ChatsResult:
    """Per-question outcomes, turned into rates by `row`."""

    recall: dict[int, list[float]] = field(default_factory=lambda: {k: [] for k in KS})
    by_difficulty: dict[str, list[float]] = field(default_factory=dict)
    admitted: list[bool] = field(default_factory=list)
    injected: int = 0
    injected_right: int = 0
    precision_per_question: list[float] = field(default_factory=list)
    quiet: dict[str, list[bool]] = field(default_factory=lambda: {"offtopic": [], "near": []})
    latency_ms: list[float] = field(default_factory=list)
    # Recall questions whose listing of max(KS) gave the chat other hits or verdicts than the
    # chat's own call: listing more must never change what the chat reads (docs/memory.md).
    listed_differs: int = 0

    def row(self) -> dict[str, Any]:
        """Percentages and latencies for the table and for JSON."""
        ordered = sorted(self.latency_ms)
        return {
            "recall": {f"R@{k}": pct(v) for k, v in self.recall.items()},
            "by_difficulty": {d: pct(v) for d, v in self.by_difficulty.items()},
            "admitted": pct(self.admitted),
            "precision": round(100 * self.injected_right / self.injected, 1) if self.injected else None,
            "precision_mean": pct(self.precision_per_question),
            "injected_per_question": round(self.injected / len(self.admitted), 2) if self.admitted else None,
            "quiet_offtopic": pct(self.quiet["offtopic"]),
            "quiet_near": pct(self.quiet["near"]),
            "latency_p50_ms": round(ordered[len(ordered) // 2], 2) if ordered else None,
            "questions": len(self.admitted),
            "listed_differs": self.listed_differs,
        }


def evaluate_chats(folder: Path, model_dir: Path, *, questions: int | None = None) -> dict[str, Any]:
    """Load the history into a fresh store, ask every question, return the metrics row."""
    from ocat.memory import MemoryStore, RetrievalLimits, StoreLocation, admitted, retrieve
    from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder
    from ocat.memory.retrieval.given import within_budget

    exchanges, asked = load_chats(folder)
    asked = asked[:questions] if questions else asked
    vector_store = bench_settings().vector_store
    # The chat's own limits, listing max(KS) of the same ranking: R@5 is the chat's top 5.
    ranking = RetrievalLimits.from_settings(vector_store, results=max(KS))
    chat_limits = RetrievalLimits.from_settings(vector_store)
    result = ChatsResult()
    with tempfile.TemporaryDirectory(prefix="ocat-chats-") as tmp:
        store = MemoryStore.open(StoreLocation(path=Path(tmp) / "chats"), OnnxMiniLMEmbedder(model_dir, threads=smoke.threads()), name="eval")
        store.add_exchanges(exchanges)
        store.wait_for_passages()  # a bulk write makes them in the background
        for q in asked:
            started = time.perf_counter()
            chat_hits = retrieve(store, q["question"], chat_limits, now=CHATS_NOW)
            gate = within_budget(admitted(chat_hits), vector_store.memory_token_budget)
            result.latency_ms.append((time.perf_counter() - started) * 1000)
            shown = [h.id for h in gate]  # context hits included: the model reads them too
            if q["kind"] != "recall":
                result.quiet[q["kind"]].append(not shown)
                continue
            targets = set(q["targets"])
            hits = retrieve(store, q["question"], ranking, now=CHATS_NOW)
            read = [h for h in hits if not h.beyond]
            listed_gate = within_budget(admitted(read), vector_store.memory_token_budget)
            result.listed_differs += (_verdicts(gate) != _verdicts(listed_gate)
                                      or [h.id for h in chat_hits] != [h.id for h in read][: len(chat_hits)])
            for k in KS:
                result.recall[k].append(len(targets & {h.id for h in hits[:k]}) / len(targets))
            result.by_difficulty.setdefault(q["difficulty"], []).append(result.recall[5][-1])
            result.admitted.append(bool(targets & set(shown)))
            right = sum(1 for i in shown if i in targets or i in q["superseded"])
            result.injected += len(shown)
            result.injected_right += right
            if shown:
                result.precision_per_question.append(right / len(shown))
        store.close()
    return result.row()


def _verdicts(hits: list[Any]) -> list[tuple[str, bool, float, str | None]]:
    """What the chat reads of each hit given: which, its verdict, its score, whose context it is."""
    return [(h.id, h.admitted, round(h.score, 9), h.context_of) for h in hits]


def format_chats(row: dict[str, Any]) -> str:
    """The chats-dev metrics as a short text table."""
    r = row["recall"]
    head = (
        f"{'R@1':>6} {'R@3':>6} {'R@5':>6} {'R@10':>6} {'admit':>6} {'prec':>6} {'per q':>6} "
        f"{'q-off':>6} {'q-near':>6} {'p50':>7}"
    )
    line = (
        f"{r['R@1']:>6} {r['R@3']:>6} {r['R@5']:>6} {r['R@10']:>6} {row['admitted']:>6} {row['precision']!s:>6} "
        f"{row['injected_per_question']!s:>6} {row['quiet_offtopic']:>6} {row['quiet_near']:>6} {row['latency_p50_ms']:>6}ms"
    )
    by = "  ".join(f"{d} {v}" for d, v in row["by_difficulty"].items())
    return "\n".join([head, "-" * len(head), line, "", f"R@5 by difficulty: {by}"])
