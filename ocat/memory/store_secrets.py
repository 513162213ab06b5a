"""Secrets already in a store (written by an older ocat, or under `memory.secrets: keep`):
counted by `ocat --check-store`, taken out in place by `ocat --redact-secrets`.

A record is rewritten under its own id: its secrets become placeholders, its vector, prompt
vector and lexical rows are made again from the new text, and every other byte (every other
metadata key, the ids, the times, the pins, the titles) is kept. No copy of a secret is kept.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator

from ocat.memory.storage.redaction import kept_row
from ocat.memory.storage.writes import WRITE_BATCH, replace_rows
from ocat.records import RECORD_KINDS, RecordKind
from ocat.text.secrets import count_kinds
from ocat.text.terminal import count_of

if TYPE_CHECKING:
    from ocat.memory.storage.batches import Row
    from ocat.memory.storage.store import MemoryStore


@dataclass(frozen=True)
class SecretsInStore:
    """The secrets a store holds, by kind, and how many records hold one; after a redaction, how
    many records were rewritten."""

    records: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    rewritten: int = 0

    @property
    def count(self) -> int:
        """How many secrets."""
        return sum(self.kinds.values())

    def line(self) -> str:
        """The check's line: how many records hold secrets, of which kinds (never the secrets)."""
        if not self.records:
            return "secrets: none found"
        return (f"secrets: {count_of(self.records, 'record')} {'holds' if self.records == 1 else 'hold'} "
                f"{count_of(self.count, 'secret')} ({count_kinds(list(Counter(self.kinds).elements()))}); "
                "`ocat --redact-secrets` replaces them with placeholders")

    def sentence(self) -> str:
        """What `--redact-secrets` did, in one sentence."""
        if not self.rewritten:
            return "No secrets found: nothing was changed."
        return (f"Redacted {count_of(self.count, 'secret')} ({count_kinds(list(Counter(self.kinds).elements()))}) "
                f"in {count_of(self.rewritten, 'record')}; every other byte of them is kept.")


def scan_mode(mode: str) -> str:
    """What a scan of a store looks for: credentials, and prose too under `strict` (under `keep`,
    what `redact` would take out: the user asked about secrets)."""
    return "strict" if mode == "strict" else "redact"


def secrets_in_store(store: MemoryStore) -> SecretsInStore:
    """Count the records that hold a secret, by kind, changing nothing."""
    kinds: Counter[str] = Counter()
    records = 0
    for _, _, found in _found(store, scan_mode(store.secrets)):
        kinds.update(found)
        records += 1
    return SecretsInStore(records, dict(kinds))


def redact_store(store: MemoryStore, progress: Callable[[int], None] | None = None) -> SecretsInStore:
    """Rewrite every record that holds a secret with placeholders instead, in place (text, vectors,
    lexical rows); `progress` hears how many records were rewritten so far."""
    kinds: Counter[str] = Counter()
    waiting: dict[RecordKind, list[Row]] = {kind: [] for kind in RECORD_KINDS}
    # Found first, written after: a rewrite while paging through a collection could move its pages.
    for kind, row, found in _found(store, scan_mode(store.secrets)):
        kinds.update(found)
        waiting[kind].append(row)
    done = 0
    for kind, rows in waiting.items():
        for start in range(0, len(rows), WRITE_BATCH):
            part = rows[start : start + WRITE_BATCH]
            replace_rows(store, kind, part)
            done += len(part)
            if progress is not None:
                progress(done)
    return SecretsInStore(done, dict(kinds), rewritten=done)


def _found(store: MemoryStore, mode: str) -> Iterator[tuple[RecordKind, Row, list[str]]]:
    """Each record holding a secret: its kind, the row as it would be kept, and the kinds found."""
    for kind in RECORD_KINDS:
        for row in store.iter_rows(kind):
            kept, kinds = kept_row(mode, kind, row)
            if kinds:
                yield kind, kept, kinds
