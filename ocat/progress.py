"""A long command's progress (/vdoc of a big folder): reported to whichever face runs it, and
stopped at its next step when the person asks (Esc, Ctrl+C)."""

from __future__ import annotations

import threading
from typing import Callable

from ocat.errors import Cancelled


class CommandProgress:
    """Called by a long command at each step (`progress(label, done, total)`); the face sets
    `report` to show it and calls `stop()` to end the command at its next step."""

    def __init__(self) -> None:
        self.report: Callable[[str, int, int], None] | None = None
        self._stop = threading.Event()

    def __call__(self, label: str, done: int, total: int) -> None:
        """Report a step; raises Cancelled if the person asked to stop (what was stored is kept)."""
        if self._stop.is_set():
            raise Cancelled(f"cancelled at {done}/{total}: what was stored is kept, and the same command completes it")
        if self.report is not None:
            self.report(label, done, total)

    def stop(self) -> None:
        """Ask the command under way to stop at its next step."""
        self._stop.set()

    def start(self, report: Callable[[str, int, int], None] | None) -> None:
        """A new command begins: forget an earlier stop, and report to `report`."""
        self._stop.clear()
        self.report = report
