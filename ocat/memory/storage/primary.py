"""The primary store's own health: Chroma's file, and a primary store that holds less than its derived files.

Chroma is the truth, and ocat keeps its derived files (the lexical index, the prompt vectors)
never ahead of it: a write goes to Chroma first, a delete leaves the derived files first. So a
derived file that holds more records than Chroma means Chroma lost them: its `chroma.sqlite3`
was emptied, truncated, replaced by an older copy or deleted (a full disk, a bad copy, a sync
tool). That is a warning to stop, not an order to shrink: nothing is reconciled away, the store
is reported damaged, and the derived files stay as they are, the traces of what was there.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from ocat.errors import StoreError
from ocat.memory.storage.derived import sqlite_problem
from ocat.records import RECORD_KINDS, RecordKind
from ocat.text.terminal import count_of

if TYPE_CHECKING:
    from ocat.memory.storage.parts import StoreParts

# Chroma's file in a store folder: every record, its metadata and the collections.
PRIMARY_FILE = "chroma.sqlite3"
# Stray records a derived file may list beyond Chroma's and still be levelled, as orphans: an
# ocat before this one deleted from Chroma first, so a crash mid-delete could leave a few. More
# than that (and more than 1% of what the file lists), or any at all over an empty store, is a
# primary store that lost records.
STRAY_RECORDS = 16
# What to do, said once wherever the store is found smaller than its derived files.
SHRUNK_ADVICE = (
    "nothing was changed. Restore chroma.sqlite3 from a backup (then every command works again); "
    "or keep only what the store holds now with `ocat --repair-store --accept-smaller-store`, "
    "which moves the derived files aside (kept, not deleted) and rebuilds them"
)


class StoreShrunk(StoreError):
    """The primary store holds fewer records than its derived files: damaged, and left as it is."""

    def __init__(self, location: str, findings: list[str]) -> None:
        self.findings = findings
        super().__init__(f"the memory store at {location} looks damaged: {'; '.join(findings)}: {SHRUNK_ADVICE}")


def primary_file(folder: Path) -> Path:
    """Where Chroma keeps a store folder's records."""
    return folder / PRIMARY_FILE


def primary_problem(folder: Path) -> str | None:
    """What `PRAGMA quick_check` finds wrong with a store folder's chroma.sqlite3 (None: sound,
    or no file yet). Read-only; for `--check-store`, which reads every page once."""
    file = primary_file(folder)
    if not file.exists():
        return None
    if file.stat().st_size == 0:
        return f"{file} is empty"
    return sqlite_problem(file)


def _indexed_records(index: Path) -> int:
    """How many records a lexical index lists (0 when it cannot be read: no sign of anything)."""
    try:
        db = sqlite3.connect(f"file:{index}?mode=ro", uri=True)
        try:
            return sum(int(db.execute(f"SELECT count(*) FROM ids_{kind}").fetchone()[0]) for kind in RECORD_KINDS)
        finally:
            db.close()
    except sqlite3.Error:
        return 0


def refuse_missing_primary(folder: Path) -> None:
    """Before Chroma opens (and would make a new, empty file): a store folder whose chroma.sqlite3
    is missing or empty while a lexical index beside it lists records lost its records. Raises
    StoreShrunk, so nothing is created or reconciled over the traces."""
    file = primary_file(folder)
    if file.exists() and file.stat().st_size > 0:
        return
    held = {index.name: n for index in sorted(folder.glob("ocat-lexical-*.sqlite3")) if (n := _indexed_records(index))}
    if not held:
        return
    state = "is missing" if not file.exists() else "is empty (0 bytes)"
    listed = ", ".join(f"{name} lists {count_of(n, 'record')}" for name, n in held.items())
    raise StoreShrunk(str(folder), [f"its primary file {file} {state}, while {listed}"])


def lost_records(stored: int, listed: int) -> bool:
    """Whether a derived file listing `listed` records of a kind means that Chroma, holding
    `stored`, lost some (rather than the file keeping a few strays to level away)."""
    excess = listed - stored
    return excess > 0 and (stored == 0 or excess > max(STRAY_RECORDS, listed // 100))


def shrink_findings(store: StoreParts, counts: Mapping[RecordKind, int] | None = None) -> list[str]:
    """Where an open store's derived files hold more records than Chroma, in words (none: sound).
    A derived file that cannot be read says nothing here (it is rebuilt). `counts`: Chroma's
    counts by kind, when the caller has read them."""
    counts = counts if counts is not None else {kind: store.count(kind) for kind in RECORD_KINDS}
    findings = []
    for kind in RECORD_KINDS:
        stored = counts[kind]
        try:
            indexed = store.lexical.count(kind)
        except StoreError:
            continue
        if lost_records(stored, indexed):
            findings.append(f"Chroma holds {count_of(stored, kind)} but the lexical index {store.lexical.path} "
                            f"lists {indexed:,}")
    try:
        vectors = store.prompts.count()
    except StoreError:
        return findings
    stored = counts["exchange"]
    if lost_records(stored, vectors):
        findings.append(f"Chroma holds {count_of(stored, 'exchange')} but the prompt vector file "
                        f"{store.prompts.path} holds {vectors:,}")
    return findings
