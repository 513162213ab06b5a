"""Searches come first: background work on a store (the passage backfill) steps aside for them,
and what other machines wrote is taken before each (a store on a server).

After a big import the backfill embeds passages for minutes, and a search that runs beside it
shares the two cores and the interpreter's lock with it: at 100,000 exchanges a chat turn's
recall took 2.5 times as long (docs/PERFORMANCE.md, "Searches while the backfill runs"). So a
search marks itself (`searching`), and the backfill waits between its small steps until no search
has run for a moment (`wait_quiet`); its thread (`PassageBackfill`) also runs at the lowest CPU priority.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

# How long after a search the backfill waits before its next step: a chat turn's searches come
# together (its recall, then the model's tool calls a second or two later), and an answer being
# streamed needs little CPU.
QUIET_SECONDS = 0.3


class Foreground:
    """The searches running on one store, and when the last one ended. `before` runs as each search
    begins: a store other machines write catches up with them (ocat.memory.storage.remote_sync)."""

    def __init__(self, before: Callable[[], object] | None = None) -> None:
        self._changed = threading.Condition()
        self._running = 0
        self._last_end = 0.0
        self._before = before

    @contextmanager
    def searching(self) -> Iterator[None]:
        """Mark a search as running for the time of the block (after `before`, inside it)."""
        with self._changed:
            self._running += 1
        try:
            if self._before is not None:
                self._before()
            yield
        finally:
            with self._changed:
                self._running -= 1
                self._last_end = time.monotonic()
                self._changed.notify_all()

    def busy(self) -> bool:
        """Whether a search runs, or ended less than QUIET_SECONDS ago."""
        with self._changed:
            return self._running > 0 or time.monotonic() - self._last_end < QUIET_SECONDS

    def wait_quiet(self, stop: threading.Event) -> None:
        """Return once no search has run for QUIET_SECONDS, or at once when `stop` is set."""
        with self._changed:
            while not stop.is_set():
                if self._running:
                    self._changed.wait(QUIET_SECONDS)
                    continue
                left = QUIET_SECONDS - (time.monotonic() - self._last_end)
                if left <= 0:
                    return
                self._changed.wait(left)


def lowest_priority() -> None:
    """Run the calling thread at the lowest CPU priority, where the system allows it (on Linux
    a thread has its own nice value); elsewhere, or when refused, nothing changes."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    except (AttributeError, OSError):
        pass


class PassageBackfill:
    """The passage backfill's thread (ocat.memory.storage.passages.sync_passages runs in it, as
    `run`), so that opening an older store stays instant: until it is done, an exchange without
    passages scores by its first window and prompt, as before. `stop` (called by
    MemoryStore.close, and at exit) waits for the current step."""

    def __init__(self, run: Callable[[threading.Event], object]) -> None:
        self._stop = threading.Event()
        self._work = run
        self.thread = threading.Thread(target=self._run, name="ocat-passages", daemon=True)
        atexit.register(self.stop)

    def _run(self) -> None:
        lowest_priority()  # the chat's own threads first, even between two searches
        # A thread's exception would be printed over the chat's screen: it is logged instead,
        # and the exchanges left score as before until the next open tries again.
        try:
            self._work(self._stop)
        except Exception:
            logging.getLogger(__name__).warning("making passage vectors stopped", exc_info=True)
        finally:
            atexit.unregister(self.stop)  # done: nothing to wait for at exit, nor the store to keep

    def start(self) -> PassageBackfill:
        """Start the thread; returns self."""
        self.thread.start()
        return self

    def stop(self) -> None:
        """Ask the backfill to stop after its current step, and wait for that."""
        self._stop.set()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join()
        atexit.unregister(self.stop)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the backfill to finish; True if it has."""
        self.thread.join(timeout)
        return not self.thread.is_alive()
