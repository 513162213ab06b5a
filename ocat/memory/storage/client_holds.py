"""Giving a Chroma client back when the last store open on it closes.

chromadb keeps the system behind each client it opened (its SQLite file, a runtime's threads, a
socket to a server) for the whole life of the process unless the client is closed: a store
opened and closed left ~6 native threads and ~10 descriptors behind. A process that opens many
stores again and again (`ocat mcp` opens its stores again each time the chat that owned them exits; the
test suite's ~1,800 stores) ended with thousands of threads, which made it slower at everything
(docs/PERFORMANCE.md, the eleventh round).

Several stores may share one client (named stores in one folder, a repair's second view), so
the client is closed only when the last store that holds it lets go. A client this module was
not told of (`opened`) is never closed by it: whoever made it owns it.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

logger = logging.getLogger(__name__)

_lock = threading.Lock()
# id(client) -> [client, how many stores hold it]. The client itself is kept so that its id is
# not reused by another object while it is listed.
_holds: dict[int, list[Any]] = {}


def opened(client: Any) -> Any:
    """Note a client ocat opened (ocat.memory.storage.chroma.open_client), held by no store yet; return it."""
    with _lock:
        _holds[id(client)] = [client, 0]
    return client


def hold(client: Any) -> None:
    """A store is open on `client`: it is not closed until that store lets go (`let_go`)."""
    with _lock:
        entry = _holds.get(id(client))
        if entry is not None and entry[0] is client:
            entry[1] += 1


def let_go(client: Any) -> None:
    """A store on `client` closed (or one that was never opened on it gives it back): the
    client is closed when no store holds it any more. Never raises: closing is tidying up."""
    with _lock:
        entry = _holds.get(id(client))
        if entry is None or entry[0] is not client:
            return
        entry[1] -= 1
        if entry[1] > 0:
            return
        del _holds[id(client)]
    _close(client)


def open_clients() -> set[int]:
    """The clients ocat opened that are still open, by id (for tests: `close_opened_since`)."""
    with _lock:
        return set(_holds)


def close_opened_since(before: set[int]) -> None:
    """Close every client opened since `before` (`open_clients`), whether or not a store still
    holds it: for a test run, whose tests open stores and leave them open."""
    with _lock:
        left = [_holds.pop(key)[0] for key in list(_holds) if key not in before]
    for client in left:
        _close(client)


def _close(client: Any) -> None:
    try:
        client.close()
    except Exception as exc:  # a client that cannot close leaves what it held, as before
        logger.debug("the Chroma client was not closed: %s", exc)
