"""A store's floor: what generic questions find in *this* store, so that a past exchange must
stand out from it to reach the model.

The calibration is one map for every store, but stores differ: in a user's many chats
with an assistant almost any everyday question finds an exchange on a neighbouring subject
(on chats-dev the median generic question's best fused score is 0.63), where in two people's
small talk it finds little (0.31-0.41 on LoCoMo). A fixed threshold that keeps LoCoMo's
evidence admitted let a tenth of off-topic questions and three quarters of "near" ones
through on chats. So each store measures its floor, the median over GENERIC_QUESTIONS of
the best exchange's fused score z, and an exchange's z is judged against
max(the calibration's own point, floor + FLOOR_MARGIN): a store whose generic questions find
little keeps the shipped gate exactly; a store where they find a lot asks more. The user's
threshold stays one number in [0, 1] (docs/RETRIEVAL.md).

Measuring ranks the questions in one pass (~0.55 s with the real model on a store of 200
exchanges, 0.24 of it embedding them: ocat.memory.retrieval.rank.best_exchange_z); it is done the first time a
store of MIN_EXCHANGES or more is searched, kept beside the lexical index, and done again in
the background once the store has grown by a tenth.
"""

from __future__ import annotations

import json
import statistics
import threading
import weakref
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from ocat.errors import StoreError
from ocat.memory.retrieval.generic_questions import GENERIC_QUESTIONS
from ocat.memory.retrieval.rank import best_exchange_z

if TYPE_CHECKING:
    from ocat.memory.storage.store import MemoryStore

# Above the floor by this much in z, fitted with the gate by `bench/recall.py --folds`
# (docs/RETRIEVAL.md, "Cross-validated figures": 0.29 on five of the seven held-out folds, 0.21
# and 0.24 on the other two; on LoCoMo floor + 0.29 stays below the calibration's own point,
# so nothing changes there).
FLOOR_MARGIN = 0.29
# A store smaller than this is judged by the calibration alone (generic questions find little).
MIN_EXCHANGES = 20
# Measure again once the store has grown (or shrunk) by this share, or by MIN_CHANGE exchanges.
STALE_SHARE = 0.1
MIN_CHANGE = 20
# Versioned with GENERIC_QUESTIONS and how z is made (passages raised it: floor/2): a change
# to either measures every store again.
META_KEY = "floor/2"


@dataclass(frozen=True)
class Floor:
    """One measurement: the median best z of the generic questions, at a store size."""

    median: float
    exchanges: int

    def stale(self, exchanges: int) -> bool:
        """Whether the store has changed enough since to measure again."""
        return abs(exchanges - self.exchanges) > max(MIN_CHANGE, STALE_SHARE * self.exchanges)


class StoreFloor:
    """The floor of one open store: read from beside the lexical index, measured when missing
    or stale; safe to use from several threads."""

    def __init__(self, store: MemoryStore) -> None:
        # Weak: the floor is kept per store in _FLOORS, and must not keep its store alive.
        self._store = weakref.ref(store)
        self._known: Floor | None = None
        # The prompt file the floor was read from: a rebuilt file (ocat.memory.storage.reconcile)
        # holds none, so the floor is read (and measured) again.
        self._read_from: object | None = None
        self._lock = threading.Lock()
        self._first = threading.Lock()
        self._refreshing = False

    @property
    def store(self) -> MemoryStore:
        """The store this floor is of."""
        store = self._store()
        if store is None:
            raise StoreError("the store was closed")
        return store

    def shift(self) -> float:
        """How far to lower an exchange's z before calibrating it: how far the store's floor
        (plus FLOOR_MARGIN) is above the calibration's point for relevance 0.65; 0 for a store
        whose generic questions find little, or that is too small to tell."""
        exchanges = self.store.lexical.count("exchange")
        if exchanges < MIN_EXCHANGES:
            return 0.0
        known = self.current()
        if known is None:
            # The first search of this store waits for it, once (a search that comes meanwhile
            # waits for the same measurement rather than making another).
            with self._first:
                try:
                    known = self._known or self.measure()
                except StoreError:
                    return 0.0  # judged by the calibration alone until a measurement succeeds
        elif known.stale(exchanges):
            self._measure_in_background()
        return self._shift_of(known)

    def known_shift(self) -> float:
        """The shift from the last measurement, without measuring (0.0 before any, or for a small store)."""
        known = self.current()
        if known is None or self.store.lexical.count("exchange") < MIN_EXCHANGES:
            return 0.0
        return self._shift_of(known)

    def _shift_of(self, known: Floor) -> float:
        point = self.store.calibration.z_at(0.65)
        return max(0.0, known.median + FLOOR_MARGIN - point)

    def current(self) -> Floor | None:
        """The last measurement, this process's or another's (None before any)."""
        prompts = self.store.prompts
        if self._read_from is not prompts:
            saved = prompts.get_meta(META_KEY)
            try:
                self._known = Floor(**json.loads(saved)) if saved else None
            except (TypeError, ValueError):
                self._known = None  # written by another version: measure again
            self._read_from = prompts
        return self._known

    def measure(self) -> Floor:
        """Run the generic questions against the store and keep the result."""
        exchanges = self.store.lexical.count("exchange")
        floor = Floor(statistics.median(best_exchange_z(self.store, GENERIC_QUESTIONS)), exchanges)
        prompts = self.store.prompts
        prompts.set_meta(META_KEY, json.dumps(asdict(floor)))
        self._known, self._read_from = floor, prompts
        return floor

    def _measure_in_background(self) -> None:
        with self._lock:
            if self._refreshing:
                return
            self._refreshing = True

        def run() -> None:
            try:
                self.measure()
            except Exception:  # best effort, unseen: the last measurement stays, and a later search tries again
                pass
            finally:
                with self._lock:
                    self._refreshing = False

        # Not a daemon: a one-shot command that ends meanwhile waits for it (about a second) rather
        # than leaving the model's native threads running into interpreter shutdown, which aborts
        # the process ("terminate called without an active exception"). The chat leaves by
        # os._exit and does not wait.
        threading.Thread(target=run, name="ocat-store-floor", daemon=False).start()


# One floor per open store, for as long as the store is open: every search of it shares the
# measurement (and its background re-measure). Kept here, not on the store: the store is
# storage, and the floor belongs to the gate.
_FLOORS: weakref.WeakKeyDictionary[MemoryStore, StoreFloor] = weakref.WeakKeyDictionary()
_FLOORS_LOCK = threading.Lock()


def floor_of(store: MemoryStore) -> StoreFloor:
    """The floor of `store` (made on first use)."""
    with _FLOORS_LOCK:
        floor = _FLOORS.get(store)
        if floor is None:
            floor = _FLOORS[store] = StoreFloor(store)
        return floor
