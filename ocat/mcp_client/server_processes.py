"""The MCP servers' processes as this process sees them: its children, their groups, and killing
what outlived a close, at exit or on SIGTERM (ocat.mcp_client.servers: no child outlives ocat).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Any, Callable


def children() -> set[int]:
    """This process's child processes (Linux's /proc; elsewhere none are known)."""
    found: set[int] = set()
    with contextlib.suppress(OSError):
        for task in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError), open(f"/proc/self/task/{task}/children") as listing:
                found |= {int(pid) for pid in listing.read().split()}
    return found


def own_group(pid: int) -> bool:
    # The SDK starts each server in a session of its own: its group is its pid.
    try:
        return os.getpgid(pid) == pid
    except OSError:
        return False


def running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def kill_groups(pids: set[int]) -> None:
    """SIGKILL each process group in `pids` whose leader is still this process's child (a server
    that outlived its close; a pid no longer ours may have been given to someone else)."""
    for pid in pids & children():
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)


def kill_on_sigterm(pids: Callable[[], set[int]]) -> None:
    """On SIGTERM, end the process groups `pids` names (the servers'), then die of SIGTERM as before (only when
    nothing else handles it, and only from the main thread, where handlers are set)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def on_term(signum: int, frame: Any) -> None:
        kill_groups(pids())
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_term)
