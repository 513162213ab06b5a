"""Closing the Chroma clients a test left open, so that one worker does not end with thousands
of threads.

ocat closes a client when the last store on it closes (ocat.memory.storage.client_holds), but
many tests open a store and never close it. Each such client kept ~6 native threads (chromadb's
runtime and SQLite workers) for the worker's life: a quick-loop worker reached ~2,200 threads,
and Textual's Pilot, which waits for the process to look idle, then waited up to its full
second at each key (help and focus: 12 s alone, 76 s after the unit tests in one process;
docs/PERFORMANCE.md, the eleventh round).
"""

from __future__ import annotations

from typing import Any

from ocat.memory.storage import client_holds


def open_clients() -> set[int]:
    """The clients ocat opened that are still open, by id."""
    with client_holds._lock:
        return set(client_holds._holds)


def close_opened_since(before: set[int]) -> None:
    """Close every client opened since `before` (`open_clients`) that is still open."""
    with client_holds._lock:
        left: list[Any] = [entry[0] for key, entry in client_holds._holds.items() if key not in before]
        for client in left:
            del client_holds._holds[id(client)]
    for client in left:
        try:
            client.close()
        except Exception:  # a client that will not close keeps what it held, as before
            pass
