"""Forked threads (/fork): a thread started from an earlier exchange of another, and the link between them.

A fork does not copy the exchanges it starts from: each of its own exchanges records the thread
and the exchange it was forked at (ocat.records.FORKED_THREAD_KEY), so memory holds every
exchange once, both threads keep all theirs, and the link travels in every export. A fork's
history is its source's history up to that exchange, then its own (`thread_history`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

from ocat.errors import UsageError
from ocat.records import FORKED_THREAD_KEY, Exchange
from ocat.text.limits import MAX_TITLE_CHARS
from ocat.text.terminal import count_of, shorten
from ocat.operations.threads import default_title, thread_title

if TYPE_CHECKING:
    from ocat.memory import MemoryStore

# Forks of forks are followed this deep at most (a link edited by hand into a circle ends here).
MAX_FORK_DEPTH = 32
FORK_SUFFIX = " (fork)"


@dataclass(frozen=True)
class ForkLink:
    """Where a thread was forked from: the thread, and the exchange its history ends with."""

    thread_id: str
    exchange_id: str


def link_of(exchanges: Sequence[Exchange]) -> ForkLink | None:
    """The fork link a thread's exchanges carry, or None for a thread that is no fork."""
    for exchange in exchanges:
        if exchange.forked_from_thread:
            return ForkLink(exchange.forked_from_thread, exchange.forked_from_exchange)
    return None


def fork_title(title: str) -> str:
    """A fork's title: its source's, then " (fork)" (within a title's length)."""
    return shorten(title, MAX_TITLE_CHARS - len(FORK_SUFFIX)) + FORK_SUFFIX


def thread_history(store: MemoryStore, thread_id: str) -> list[Exchange]:
    """A thread's whole history, oldest first: for a fork, its source's history up to the exchange
    it was forked at (followed back through forks of forks), then its own exchanges."""
    own = store.get_thread(thread_id)
    return _inherited(store, link_of(own), {thread_id}) + own


def _inherited(store: MemoryStore, link: ForkLink | None, seen: set[str]) -> list[Exchange]:
    """The history a fork starts with. The source's exchanges up to the fork's exchange; when that
    one was deleted since, those older than the fork's first own exchange are kept instead."""
    if link is None or link.thread_id in seen or len(seen) > MAX_FORK_DEPTH:
        return []
    seen.add(link.thread_id)
    source = store.get_thread(link.thread_id)
    ids = [e.exchange_id for e in source]
    if link.exchange_id in ids:
        source = source[: ids.index(link.exchange_id) + 1]
    return _inherited(store, link_of(source), seen) + source


@dataclass(frozen=True)
class ForkOf:
    """A fork of a thread, as the memory browser names it."""

    thread_id: str
    title: str
    exchange_id: str


def forks_of(store: MemoryStore, thread_id: str) -> list[ForkOf]:
    """The threads forked from this one (one filtered read of the store)."""
    found: dict[str, str] = {}
    for exchange in store.exchanges_where({FORKED_THREAD_KEY: thread_id}):
        found.setdefault(exchange.thread_id, exchange.forked_from_exchange)
    titles = store.threads.titles(list(found))
    return [ForkOf(fork, titles.get(fork) or fork[:8], exchange) for fork, exchange in found.items()]


def link_lines(store: MemoryStore, thread_id: str, exchanges: Sequence[Exchange]) -> list[str]:
    """The thread's links in words, for the memory browser: where it was forked from, and its forks."""
    lines = []
    link = link_of(exchanges)
    if link is not None:
        source = store.get_thread(link.thread_id)
        ids = [e.exchange_id for e in source]
        if not source:
            lines.append(f"Forked from a thread no longer in memory ({link.thread_id[:8]}).")
        else:
            title = thread_title(store, link.thread_id, source)
            at = (f"after its exchange {ids.index(link.exchange_id) + 1} of {len(source)} "
                  f"({default_title(source[ids.index(link.exchange_id)].user_prompt)!r})"
                  if link.exchange_id in ids else "at an exchange since deleted")
            lines.append(f"Forked from {title!r} (thread {link.thread_id[:8]}), {at}.")
    forks = forks_of(store, thread_id)
    if forks:
        named = ", ".join(f"{f.title!r} ({f.thread_id[:8]})" for f in forks)
        lines.append(f"Forked into {count_of(len(forks), 'thread')}: {named}.")
    return lines


def fork_point(history: Sequence[Exchange], back: int) -> Exchange:
    """The exchange `back` places from the end of a conversation (1: the last), which a fork keeps last."""
    if not history:
        raise UsageError("nothing to fork yet: this conversation is empty")
    if not 1 <= back <= len(history):
        raise UsageError(f"this conversation has {count_of(len(history), 'exchange')}: /fork takes 1 "
                         f"(the last) to {len(history)} (the first)")
    return history[len(history) - back]
