"""The passage backfill steps aside for searches (issue 35): while a search runs, and for a moment
after it, the backfill starts no step; once the store is quiet it goes on, and a stop still ends it."""

from __future__ import annotations

import threading
import time
from typing import Callable

from ocat.memory import MemoryStore, RetrievalLimits, retrieve
from ocat.memory.storage import foreground
from ocat.memory.storage.foreground import Foreground
from ocat.memory.storage.passages import PASSAGE_STEP
from ocat.records import Exchange

LIMITS = RetrievalLimits(exchange_results=5, document_results=5, exchange_threshold=0.65, document_threshold=0.7)


def left_to_do(store: MemoryStore) -> int:
    return len(store.prompts.without_passages(10**6))


class Watched(Foreground):
    """A Foreground that says when a waiter has come to `wait_quiet`, so a test waits for that
    instead of sleeping and hoping the other thread got there."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = threading.Event()

    def wait_quiet(self, stop: threading.Event) -> None:
        self.waiting.set()
        super().wait_quiet(stop)


def happens_within(condition: Callable[[], bool], seconds: float) -> bool:
    """Whether `condition()` comes true within `seconds` (polled; returns as soon as it does).
    What must *not* happen can only be watched for a while: this is that while, cut short by a failure."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def many(count: int) -> list[Exchange]:
    return [Exchange(user_prompt=f"question {n} about tiles", assistant_response=f"answer {n}: grout", thread_id="t",
                     session_id="s", exchange_id=f"e{n}", timestamp=1_700_000_000.0 + n) for n in range(count)]


def test_wait_quiet_waits_while_a_search_runs_and_a_moment_after(monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(foreground, "QUIET_SECONDS", 0.05)
    front, stop = Watched(), threading.Event()
    returned: list[float] = []
    with front.searching():
        waiter = threading.Thread(target=lambda: (front.wait_quiet(stop), returned.append(time.monotonic())))
        waiter.start()
        assert front.waiting.wait(30), "the waiter never came to wait_quiet"
        # Held for as long as the search runs: three quiet periods pass and it is still waiting.
        assert not happens_within(lambda: bool(returned), 3 * foreground.QUIET_SECONDS)
        assert front.busy()
        ended = time.monotonic()
    waiter.join(2)
    assert returned and returned[0] - ended >= 0.05  # and a quiet moment after it
    stop.set()
    with front.searching():
        front.wait_quiet(stop)  # a stop is never held up by a search


def test_the_backfill_pauses_for_a_search_and_finishes_after(store: MemoryStore, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(foreground, "QUIET_SECONDS", 0.05)
    store.add_exchanges(many(PASSAGE_STEP * 6))
    store.prompts.delete_passages()
    total = left_to_do(store)
    store.foreground = watched = Watched()
    with store.foreground.searching():
        store.start_backfill()
        assert watched.waiting.wait(30), "the backfill never came to wait for the search"
        # Not one step begun while the search runs (six quiet periods): every exchange still waits.
        assert not happens_within(lambda: left_to_do(store) < total, 6 * foreground.QUIET_SECONDS)
        assert retrieve(store, "tiles grout", LIMITS)  # searches go on meanwhile
    assert store.wait_for_passages(timeout=30)
    assert left_to_do(store) == 0


def test_a_caller_waiting_for_the_passages_makes_them_itself(store: MemoryStore) -> None:
    # The backfill runs at the lowest CPU priority: on a busy machine a bench waiting for it
    # waited minutes while it got no turn. Here it cannot take a step (a search holds it), as a
    # starved thread cannot; the caller who waits is not held by that, and makes them all.
    store.add_exchanges(many(PASSAGE_STEP * 3))
    store.prompts.delete_passages()
    store.foreground = watched = Watched()
    with store.foreground.searching():
        store.start_backfill()
        assert watched.waiting.wait(30), "the backfill never came to wait for the search"
        waiter = threading.Thread(target=store.wait_for_passages)
        waiter.start()
        waiter.join(30)
        made = not waiter.is_alive() and left_to_do(store) == 0
    waiter.join()
    assert made, "wait_for_passages waited for the backfill's turn instead of making the passages"
    assert store.backfill is not None and not store.backfill.thread.is_alive()


def test_a_search_marks_the_store_busy(store: MemoryStore) -> None:
    store.add_exchanges(many(3))
    seen: list[bool] = []
    original = store.lexical.search

    def watched(*args, **kwargs):  # noqa: ANN202
        seen.append(store.foreground.busy())
        return original(*args, **kwargs)

    store.lexical.search = watched  # type: ignore[method-assign]
    retrieve(store, "tiles", LIMITS)
    assert seen and all(seen)


def test_the_next_exchanges_to_do_are_found_without_a_scan(store: MemoryStore) -> None:
    # At 100k a step's scan past the done rows read every vector (100 ms a step, and growing).
    plan = store.prompts._db.execute(
        "EXPLAIN QUERY PLAN SELECT record_id FROM prompt_vectors WHERE passages IS NULL LIMIT 16").fetchall()
    assert "USING INDEX prompt_vectors_waiting" in " ".join(str(row) for row in plan)
