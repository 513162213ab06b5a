"""The wake block: what the model always knows at the start of a thread, and the pins it holds.

In this order, within `wake.tokens`: the memories the user pinned (latest first), their
profile (a Markdown file they edit), one line for each of their latest conversations, and one
for their latest one-shot questions (`ocat --ask`), which never push a conversation out. What does not
fit is left out and the block says so. The chat gives it to the model in every thread (and
leaves the pinned memories out of retrieval, so nothing is given twice); `/wake`, `ocat --wake`
and MCP's `memory_wake` show the same block.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ocat.errors import OcatError
from ocat.operations.profile import fit_lines, read_profile
from ocat.records import ONE_SHOT, SUPERSEDED_KEY, Exchange
from ocat.text.terminal import count_of, local_time, shorten
from ocat import memory
from ocat.config.locations import display_path
from ocat.operations.add import add_note, secrets_clause
from ocat.operations.lookup import recent_threads, resolve_id, short_id
from ocat.operations.notes import bring_back
from ocat.operations.versions import shown_record
from ocat.text.tokens import estimate_tokens

if TYPE_CHECKING:
    from ocat.config.loading import Settings
    from ocat.memory import Pinned
    from ocat.memory import MemoryStore
    from ocat.operations.lookup import ThreadSummary

# The longest a pinned memory is quoted in the block, in characters (a pinned document chunk
# can be long; the id lets the model's user open it whole).
PIN_CHARS = 600
# Threads read per line the block lists: one-shot questions may be many among the latest.
THREADS_READ_PER_LINE = 4
# One-shot questions quoted on their line, and how much of each.
ASKS_QUOTED, ASK_CHARS = 3, 60


@dataclass
class WakeBlock:
    """The parts of the wake block that fit, and what was left out."""

    pins: list[str] = field(default_factory=list)
    pinned_ids: list[str] = field(default_factory=list)
    profile: str = ""
    profile_path: str = ""
    threads: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    tokens: int = 0
    # What the user should know about how it was built (a profile cut or left out), not the model.
    notes: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """True when there is nothing to tell the model."""
        return not (self.pins or self.profile or self.threads)

    def summary(self) -> str:
        """What the block holds, in a few words: '1 pinned memory, your profile, 3 recent threads'."""
        parts = []
        if self.pins:
            parts.append(count_of(len(self.pins), "pinned memory", "pinned memories"))
        if self.profile:
            parts.append("your profile")
        if self.threads:
            parts.append(count_of(len(self.threads), "recent thread"))
        return ", ".join(parts) or "nothing"

    def text(self) -> str:
        """The block as the model reads it (and `/wake` shows it)."""
        parts = []
        if self.pins:
            parts.append("## Pinned memories\n" + "\n".join(self.pins))
        if self.profile:
            parts.append(f"## About the user ({self.profile_path})\n{self.profile}")
        if self.threads:
            parts.append("## Recent threads\n" + "\n".join(self.threads))
        if self.left_out:
            parts.append(f"(Left out to keep within the wake budget: {', '.join(self.left_out)}.)")
        return "\n\n".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`ocat --wake --output json`, MCP)."""
        return {
            "text": self.text(), "tokens": self.tokens, "pins": self.pins, "pinned_ids": self.pinned_ids,
            "profile": self.profile, "profile_path": self.profile_path, "threads": self.threads,
            "left_out": self.left_out, "notes": self.notes,
        }


def pin_line(pinned: Pinned, shown_id: str = "") -> str:
    """A pinned memory as one entry of the block: id (`shown_id`, else its start), kind, date, text."""
    record = pinned.record
    if isinstance(record, Exchange):
        text = f"User: {record.user_prompt}\nAssistant: {record.assistant_response}"
        what = "exchange"
    else:
        text = record.text
        what = "note" if record.metadata.get("manual_entry") else "document"
    quoted = shorten(" ".join(text.split()), PIN_CHARS)
    # A pinned memory a newer version updates says so: the model must not take it for the current fact.
    link = memory.link_of(pinned.record_metadata())
    kind = "exchange" if isinstance(record, Exchange) else "document"
    newer = f", outdated: updated by [{shown_record(kind, link[0])[:8]}]" if link else ""
    change = f" ({link[1]})" if link and link[1] else ""
    when = local_time(pinned.pinned_at, "%Y-%m-%d")
    return f"- [{shown_id or pinned.id[:8]}] ({what}, pinned {when}{newer}{change}) {quoted}"


def thread_line(summary: ThreadSummary, repeats: int = 1) -> str:
    """A recent thread as one line: title (or its first prompt), last date, size (and how many
    times its one question was asked, when more than once)."""
    name = summary.given_title or shorten(" ".join(summary.first_prompt.split()), 80) or summary.thread_id[:8]
    size = count_of(summary.exchanges, "exchange") if repeats == 1 else f"asked {repeats} times"
    return f'- "{name}" · {local_time(summary.last_active, "%Y-%m-%d")} · {size}'


def thread_lines(threads: Sequence[ThreadSummary], count: int) -> list[str]:
    """At most `count` lines for the latest threads (most recent first): a conversation a line,
    each once (a one-exchange thread that repeats an earlier one's question is counted on its
    line, not listed again); then, if a line is left, the one-shot questions (`ocat --ask`)
    together on one line. Grouped rather than left out: the model still learns what was asked
    lately, and three asks of the same question can no longer push the conversations out."""
    if count <= 0:
        return []
    talks: dict[str, tuple[ThreadSummary, int]] = {}
    asks: list[ThreadSummary] = []
    for summary in threads:
        if summary.origin == ONE_SHOT:
            asks.append(summary)
            continue
        key = summary.thread_id if summary.exchanges > 1 else "said:" + " ".join(summary.title.lower().split())
        first, repeats = talks.get(key, (summary, 0))
        talks[key] = (first, repeats + 1)
    lines = [thread_line(first, repeats) for first, repeats in list(talks.values())[:count]]
    if asks and len(lines) < count:
        lines.append(_asks_line(asks))
    return lines


def _asks_line(asks: Sequence[ThreadSummary]) -> str:
    """The latest one-shot questions on one line, each distinct one quoted once."""
    quoted = list(dict.fromkeys(shorten(" ".join(a.first_prompt.split()), ASK_CHARS) for a in asks))
    shown = "; ".join(f'"{q}"' for q in quoted[:ASKS_QUOTED])
    more = f" and {count_of(len(quoted) - ASKS_QUOTED, 'other')}" if len(quoted) > ASKS_QUOTED else ""
    latest = local_time(max(a.last_active for a in asks), "%Y-%m-%d")
    return f"- one-shot questions (ocat --ask): {shown}{more} · latest {latest} · {count_of(len(asks), 'ask')}"


def build_wake(
    settings: Settings,
    store: MemoryStore | Sequence[MemoryStore] | None,
    *,
    count: Callable[[str], int] | None = None,
    exclude_thread: str | None = None,
    project: str | None = None,
) -> WakeBlock:
    """The wake block for a new thread (`exclude_thread`: the thread being continued, which the
    model is sent as history already). Several stores (an MCP server reading `a,b`) give their
    pins and threads together; the recent threads of `project` (the chat's) come first. Memory
    that cannot be read leaves its part out."""
    count = count or estimate_tokens
    stores: list[MemoryStore] = [] if store is None else list(store) if isinstance(store, Sequence) else [store]
    block = WakeBlock(profile_path=_shown_path(settings.profile_path))
    budget = settings.wake.tokens
    pins = sorted(((s, p) for s in stores for p in _pins(s)), key=lambda sp: sp[1].pinned_at, reverse=True)
    wanted = (settings.wake.threads + 1) * THREADS_READ_PER_LINE
    threads = sorted((t for s in stores for t in _threads(s, wanted)), key=lambda t: t.last_active, reverse=True)
    if project:  # this project's threads first, each part newest first (sorted is stable)
        threads.sort(key=lambda t: not memory.belongs(t.project, project))
    lines = thread_lines([t for t in threads if t.thread_id != exclude_thread], settings.wake.threads)
    used = skipped = 0
    for owner, pinned in pins:
        # A pin too long for what is left is skipped; a shorter one after it may still fit.
        line = pin_line(pinned, _short(owner, pinned.id))
        cost = count(line) + 1
        if used + cost > budget:
            skipped += 1
            continue
        block.pins.append(line)
        block.pinned_ids.append(pinned.id)
        used += cost
    if skipped:
        block.left_out.append(count_of(skipped, "pinned memory", "pinned memories"))
    profile = read_profile(settings.profile_path)
    if profile.note:
        block.notes.append(profile.note)
    if profile.text:
        fitted = fit_lines(profile.text, budget - used - 8, count)
        if fitted:
            block.profile = fitted
            used += count(fitted) + 8
        if fitted != profile.text:
            block.left_out.append("the end of the profile" if fitted else "the profile")
    for n, line in enumerate(lines):
        cost = count(line) + 1
        if used + cost > budget:
            block.left_out.append(count_of(len(lines) - n, "recent thread"))
            break
        block.threads.append(line)
        used += cost
    block.tokens = used
    return block


def _short(store: MemoryStore | None, record_id: str) -> str:
    """The id as /vget and /unpin take it back (a derived file may fail: then its start)."""
    try:
        return short_id(store, record_id) if store is not None else record_id[:8]
    except OcatError:
        return record_id[:8]


def _pins(store: MemoryStore) -> list[Pinned]:
    """The pins the block shows: a note replaced by a newer one (the model's `remember`) is not."""
    try:
        return [p for p in memory.pinned(store) if not p.record_metadata().get(SUPERSEDED_KEY)]
    except OcatError:
        return []


def _threads(store: MemoryStore, count: int) -> list[ThreadSummary]:
    if count <= 0:
        return []
    try:
        return recent_threads(store, count)
    except OcatError:  # a damaged index (DerivedFileError) is rebuilt on the next turn
        return []


def _shown_path(path: Path) -> str:
    return display_path(str(path))


def pin(store: MemoryStore, id_or_prefix: str) -> str:
    """Pin the memory with this id (or unique start of one); returns its whole id. A note a
    newer one replaced is given to the model again: a pin on it would never reach the model."""
    record_id = resolve_id(store, id_or_prefix)
    bring_back(store, [record_id])
    memory.set_pinned(store, record_id, 0)
    return record_id


def unpin(store: MemoryStore, id_or_prefix: str) -> str:
    """Unpin the memory with this id (or unique start of one); returns its whole id."""
    record_id = resolve_id(store, id_or_prefix)
    memory.set_pinned(store, record_id, None)
    return record_id


@dataclass(frozen=True)
class NotePinned:
    """What `/remember` did: the note's ids, and the note that had replaced it, when its words
    were a replaced note's (brought back: the user's own note wins over the model's `replaces`)."""

    ids: tuple[str, ...]
    had_replaced_it: str | None = None
    # '; 1 secret not kept (OpenAI key)' when the note held one (operations.add.secrets_clause), else ''.
    secrets: str = ""


def remember(store: MemoryStore, text: str, settings: Settings) -> NotePinned:
    """Store `text` as a note and pin it (every chunk of it, should it be long). A note with
    these words that a newer note replaced is given to the model again: a pin on a replaced
    note would never reach it."""
    # Typed on purpose: prose is kept even under `memory.secrets: strict`; credentials never are.
    added = add_note(store, text, settings.chunking, source="remember_command", credentials_only=True)
    newer = bring_back(store, added.ids)
    for record_id in added.ids:
        memory.set_pinned(store, record_id, 0)
    return NotePinned(tuple(added.ids), newer, secrets_clause(added.secrets, added.secrets_kept))


def pins(store: MemoryStore) -> list[tuple[str, str]]:
    """Every pinned memory as (id, its line with the id to type back), the latest pinned first."""
    return [(p.id, pin_line(p, short_id(store, p.id))) for p in _pins(store)]
