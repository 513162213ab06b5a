"""The benches' smoke mode: `--smoke` runs a bench at its smallest, a few questions over a few
exchanges, only to prove it still runs and prints its table (tests/cli/test_bench_smoke.py runs each
so). Its figures mean nothing. An environment variable carries the mode, so the data loaders that
every bench shares (bench/recall.py, bench/recall_chats.py) and the processes a bench starts see it.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, Callable

# Not OCAT_*: ocat refuses an OCAT_ variable that names no setting, and the benches start ocat.
ENV = "BENCH_SMOKE"
# A folder where the local model's vectors are kept by model and text, read back when the same
# text is embedded again (ocat.memory.embedding.vector_cache; docs/development.md): the suite's
# smoke runs share one for the run. Every bench that reads the dev sets imports this module.
VECTORS_ENV = "BENCH_VECTOR_CACHE"
# In smoke mode, the threads kept (chats-dev, changing-dev: one in STRIDE, so that every month
# still has some) and LoCoMo's sessions (one in SESSION_STRIDE, so every conversation has two),
# and of the questions they answer, QUESTIONS of each kind.
STRIDE = 6
SESSION_STRIDE = 10
QUESTIONS = 2


def add_flag(parser: argparse.ArgumentParser) -> None:
    """`--smoke` on a bench's command line."""
    parser.add_argument("--smoke", action="store_true",
                        help="the smallest run: a few questions over a few exchanges, to check that the bench runs")


def start(wanted: bool) -> bool:
    """Turn smoke mode on (for this process and those it starts) when `wanted`; whether it is on."""
    if wanted:
        os.environ[ENV] = "1"
    return on()


def on() -> bool:
    """Whether this run is a smoke run."""
    return os.environ.get(ENV) == "1"


def kept_threads(exchanges: list[Any]) -> list[Any]:
    """One thread in STRIDE, in the order threads first appear (all of them outside smoke mode)."""
    if not on():
        return exchanges
    order: dict[str, int] = {}
    for exchange in exchanges:
        order.setdefault(exchange.thread_id, len(order))
    return [e for e in exchanges if order[e.thread_id] % STRIDE == 0]


def kept_sessions(numbers: list[int]) -> list[int]:
    """One session in SESSION_STRIDE, the first among them (all of them outside smoke mode)."""
    return numbers[::SESSION_STRIDE] if on() else numbers


def _named(question: dict[str, Any]) -> set[str]:
    """The exchanges a chats-dev question names: its targets, those they superseded, those related."""
    return set(question.get("targets", ())) | set(question.get("superseded", ())) | set(question.get("related", ()))


def kept_questions(questions: list[dict[str, Any]], ids: set[str],
                   named: Callable[[dict[str, Any]], set[str]] = _named) -> list[dict[str, Any]]:
    """The first QUESTIONS of each kind (`kind`, else `category`) whose `named` exchanges are all kept."""
    if not on():
        return questions
    counts: dict[str, int] = {}
    kept = []
    for question in questions:
        kind = str(question.get("kind", question.get("category", "")))
        if named(question) <= ids and counts.get(kind, 0) < QUESTIONS:
            counts[kind] = counts.get(kind, 0) + 1
            kept.append(question)
    return kept


def size(full: int, small: int) -> int:
    """`small` in smoke mode, else `full`: a bench's size (words, lines, runs)."""
    return small if on() else full


def first(items: list[Any], count: int) -> list[Any]:
    """The first `count` items in smoke mode, all of them otherwise."""
    return items[:count] if on() else items


def threads() -> int | None:
    """The threads a bench's own model runs on: those ocat's `embedding.threads` gives its model
    (OCAT_EMBEDDING_THREADS; unset or 0: None, one per core, onnxruntime's choice). The suite
    sets one, as for every ocat process it starts: on two cores that two test workers keep busy,
    the model's pool of two threads took ~1.8 times the CPU for the same vectors, bit for bit."""
    return int(os.environ.get("OCAT_EMBEDDING_THREADS") or 0) or None


def keep_vectors() -> None:
    """Keep the model's vectors in the folder VECTORS_ENV names, if it names one."""
    from ocat.memory.embedding.vector_cache import use_folder

    folder = os.environ.get(VECTORS_ENV)
    if folder:
        use_folder(Path(folder))


keep_vectors()
