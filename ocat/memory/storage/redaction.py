"""Records as memory keeps them: the secrets in their text replaced before they are embedded,
indexed and stored (ocat.text.secrets), at the one place every write passes (storage.writes).

The store's mode (`memory.secrets`, `MemoryStore.secrets`) says what is taken out. A caller that
wants to know what was found, or to keep prose in a note the user typed (`/remember`), opens a
`counting_secrets` block around its write; the block belongs to the thread that opened it.
"""

from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from ocat.records import THREAD_TITLE_KEY, TOOL_CALLS_KEY, Exchange, RecordKind, exchange_text, searched_text
from ocat.text.secrets import Redaction, redact_secrets

if TYPE_CHECKING:
    from ocat.memory.storage.batches import Row

# The metadata of an exchange that holds what was said (its text is made from the first two).
_SAID = ("user_prompt", "assistant_response", TOOL_CALLS_KEY, THREAD_TITLE_KEY)


@dataclass
class SecretsSeen:
    """The secrets the writes of a `counting_secrets` block found, by kind, and in how many records."""

    kinds: Counter[str] = field(default_factory=Counter)
    records: int = 0
    # The mode those writes ran in: "keep" means the secrets were stored as they were.
    mode: str = "redact"
    # Strict lowered to redact for this block (a note the user typed keeps its prose).
    credentials_only: bool = False

    @property
    def count(self) -> int:
        """How many secrets were found."""
        return sum(self.kinds.values())


_seen: ContextVar[SecretsSeen | None] = ContextVar("ocat_secrets_seen", default=None)


@contextmanager
def counting_secrets(*, credentials_only: bool = False) -> Iterator[SecretsSeen]:
    """Count what the writes made in this block (in this thread) found; `credentials_only` keeps
    passwords said in prose even under `strict` (`/remember` of what the user typed)."""
    seen = SecretsSeen(credentials_only=credentials_only)
    token = _seen.set(seen)
    try:
        yield seen
    finally:
        _seen.reset(token)


def effective_mode(mode: str) -> str:
    """The store's mode as the current block lowers it (strict -> redact for a typed note)."""
    seen = _seen.get()
    return "redact" if mode == "strict" and seen is not None and seen.credentials_only else mode


def kept_rows(mode: str, kind: RecordKind, rows: list[Row]) -> list[Row]:
    """The rows with their secrets taken out as `mode` says (text and the metadata that holds what was
    said); the ids, and every other byte, as given. Counted in the current `counting_secrets` block."""
    mode = effective_mode(mode)
    seen = _seen.get()
    kept: list[Row] = []
    for row in rows:
        new_row, kinds = kept_row(mode, kind, row)
        if kinds and seen is not None:
            seen.kinds.update(kinds)
            seen.records += 1
            seen.mode = mode
        kept.append(new_row)
    return kept


def kept_titles(mode: str, titles: Mapping[str, str] | None) -> Mapping[str, str] | None:
    """Thread titles as `mode` keeps them (an imported thread is often named by its first prompt)."""
    if not titles:
        return titles
    mode = effective_mode(mode)
    return {thread: redact_secrets(title, mode).text for thread, title in titles.items()}


def kept_row(mode: str, kind: RecordKind, row: Row) -> tuple[Row, list[str]]:
    """One row as `mode` keeps it, and the kinds of the secrets found in it (the row itself when none)."""
    record_id, text, metadata = row
    if kind != "exchange" or not metadata or "user_prompt" not in metadata:
        whole = redact_secrets(text, mode)
        return (row if whole.text == text else (record_id, whole.text, metadata)), list(whole.kinds)
    kinds: list[str] = []
    changed: dict[str, Any] = {}
    for key in _SAID:
        value = metadata.get(key)
        if isinstance(value, str) and value:
            redaction: Redaction = redact_secrets(value, mode)
            kinds += redaction.kinds
            if redaction.text != value:
                changed[key] = redaction.text
    if not changed:
        return row, kinds
    said = {**metadata, **changed}
    # The searched text is made from the prompt and the answer, as MemoryStore.add_exchanges makes it.
    return (record_id, searched_text(exchange_text(said["user_prompt"], said["assistant_response"])), said), kinds


def kept_exchange(exchange: Exchange, mode: str) -> tuple[Exchange, tuple[str, ...]]:
    """An exchange as memory keeps it (for a chat's kept file, before the store has it), and the
    kinds of the secrets found in it; under `keep` the exchange as it is."""
    row = (exchange.exchange_id, exchange.text, exchange.to_metadata())
    (_, _, metadata), kinds = kept_row(effective_mode(mode), "exchange", row)
    if metadata is row[2]:
        return exchange, tuple(kinds)
    return Exchange.from_metadata(metadata), tuple(kinds)
