"""What opening a store checks and repairs before anything reads it.

Chroma is the record; the lexical index and the prompt vectors are derived from it. A store
made by an older ocat, a crash between two writes, or a Chroma server written by another
client can leave them behind; opening the store brings them level, and settles which
calibration its scores use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ocat.errors import StoreError
from ocat.memory.scoring import Calibration
from ocat.models import RECORD_KINDS, Exchange

if TYPE_CHECKING:
    from ocat.memory.store import MemoryStore, Row

READ_PAGE = 1000
# A backfill of prompt vectors at least this long is announced: about 3 s of embedding on two
# cores (1,000 LoCoMo turns took 5.8 s; a chat's prompts are shorter).
ANNOUNCE_BACKFILL = 500


def sync_lexical(store: MemoryStore) -> None:
    """Rebuild a kind's lexical index when it disagrees with Chroma.

    That happens for a store made before the index existed, after a crash between the
    two writes, or when a Chroma server was written by another client.
    """
    for kind in RECORD_KINDS:
        if store.lexical.count(kind) == store.count(kind):
            continue
        store.lexical.clear(kind)
        page: list[Row] = []
        for record in store.iter_records(kind):
            if isinstance(record, Exchange):
                page.append((record.exchange_id, record.text, record.to_metadata()))
            else:
                page.append((record.id, record.text, record.metadata))
            if len(page) >= READ_PAGE:
                store.lexical.add(kind, page)
                page = []
        store.lexical.add(kind, page)


def sync_prompts(store: MemoryStore, notify: Callable[[str], None] | None = None) -> bool:
    """Give every exchange its prompt vector (see ocat.memory.prompts), telling `notify` when it
    is more than a moment's work (a store made before prompt vectors: once). False if that
    failed: the store still opens, and scores as it did before."""

    def announce(count: int) -> None:
        if notify and count >= ANNOUNCE_BACKFILL:
            notify(f"embedding the prompts of {count:,} earlier exchanges (once, for the memory gate)…")

    try:
        store.prompts.backfill(store.exchanges, announce=announce)
    except StoreError:
        return False
    return True


def settled_calibration(store: MemoryStore, shipped: Calibration, *, complete: bool) -> Calibration:
    """The calibration the store's scores use: the one recorded when it was made, so scores keep
    their meaning; a fit ocat shipped before is replaced by `shipped` (and recorded) once every
    exchange has its prompt vector (`complete`)."""
    recorded = Calibration.from_metadata(store.exchanges.metadata or {})
    if recorded is None:
        return shipped
    settled = recorded.upgraded(shipped) if complete else recorded
    if settled != recorded:
        try:
            # Chroma replaces the whole dict: keep the model's name and the rest.
            store.exchanges.modify(metadata={**(store.exchanges.metadata or {}), **settled.to_metadata()})
        except Exception:
            return recorded  # not recorded, so not used: the next open tries again
    return settled
