"""Leaving at once: the event loop's thread pool does not make the closing window wait.

Textual runs thread workers (opening memory, importing litellm) and `asyncio.to_thread`
calls in the loop's default executor, and `asyncio.run` joins that executor before it
returns: quitting while memory still opens took seconds. With this executor the loop stops
without waiting; `ocat.cli` then ends the process (os._exit), and with it those threads.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor


class NoWaitExecutor(ThreadPoolExecutor):
    """A thread pool whose shutdown never waits for running work (queued work is dropped)."""

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        super().shutdown(wait=False, cancel_futures=True)


def install() -> None:
    """Make the running loop's default executor one that does not wait at shutdown."""
    asyncio.get_running_loop().set_default_executor(NoWaitExecutor(thread_name_prefix="ocat-worker"))
