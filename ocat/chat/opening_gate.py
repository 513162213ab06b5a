"""Whether a session's memory is opening, for a turn that would rather wait for it.

The first turn's wake block lists the recent threads only once the store is open; memory's
loading (ocat.chat.memory_loading) begins and ends the gate, the wake block (ocat.chat.turn_inputs)
waits on it, and is made before a thread's first turn only once memory has settled.
"""

from __future__ import annotations

import threading
import time
from typing import Callable


class OpeningGate:
    """Whether memory is opening; `downloading` says whether the model's first download runs (not waited for)."""

    def __init__(self, downloading: Callable[[], bool]) -> None:
        self._downloading = downloading
        self._settled = threading.Event()
        self._settled.set()

    def begin(self) -> None:
        """Memory begins to open (or a face is about to open it): `wait` waits until `end`."""
        self._settled.clear()

    def end(self) -> None:
        """Opening memory has ended, however it went."""
        self._settled.set()

    @property
    def settled(self) -> bool:
        """Whether memory is not opening (it has opened, failed, or was never to open)."""
        return self._settled.is_set()

    def wait(self, seconds: float) -> bool:
        """Wait, at most `seconds`, for memory to finish opening; True when it is not opening
        (any more). A first download of the model is not waited for: it takes minutes."""
        deadline = time.monotonic() + seconds
        while not self._settled.wait(timeout=0.1):
            if self._downloading() or time.monotonic() >= deadline:
                return False
        return True
