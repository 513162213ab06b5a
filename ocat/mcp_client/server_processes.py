"""The MCP servers' processes as this process sees them, and ending every one of their
descendants, whatever the servers did (ocat.mcp_client.servers: no descendant outlives ocat).

The SDK starts each stdio server in a session of its own, so the server's pid is its process
group's id and its session's. The groups are recorded here, process-wide, as the servers start:
a group outlives its leader (a server that exits on stdin EOF leaves its children in it, their
parent now init), and Linux gives no new process a pid still in use as a group's or a session's
id, so the group can be signalled after the leader is gone. A server's family is every live
process in its group or its session, and every descendant of those (a grandchild that made a
session of its own is found through its parent while that parent lives: `family` is taken
before a server is stopped, for that reason). Ending a family is SIGTERM, a short grace, then
SIGKILL. What is not found: a descendant that left the session and whose parents all exited
before the snapshot (a daemon that double-forked on purpose); Linux's child subreaper would
catch it, but would make ocat the parent of every orphan of every child it starts (the Chroma
server's, the editor's) and is not set.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

# Seconds a server's family is given, after SIGTERM, to end before SIGKILL.
GRACE_SECONDS = 1.0
# How often the grace looks whether they have ended.
_POLL_SECONDS = 0.05

_groups: set[int] = set()
_known: set[Process] = set()
_lock = threading.Lock()


@dataclass(frozen=True)
class Process:
    """A live process as /proc shows it; `started` (clock ticks after boot) tells a pid reused apart."""

    pid: int
    ppid: int
    group: int
    session: int
    started: int


def children() -> set[int]:
    """This process's child processes (Linux's /proc; elsewhere none are known)."""
    found: set[int] = set()
    with contextlib.suppress(OSError):
        for task in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError), open(f"/proc/self/task/{task}/children") as listing:
                found |= {int(pid) for pid in listing.read().split()}
    return found


def own_group(pid: int) -> bool:
    """Whether `pid` leads a process group of its own (the SDK starts each server so)."""
    try:
        return os.getpgid(pid) == pid
    except OSError:
        return False


def writes_errors_to(pid: int, path: Path) -> bool:
    """Whether `pid`'s stderr is the file `path` (each server's is its own log: this tells which
    of the children started meanwhile is which server's)."""
    try:
        return os.readlink(f"/proc/{pid}/fd/2") == os.path.realpath(path)
    except OSError:
        return False


def running(pid: int) -> bool:
    """Whether `pid` is a process that has not ended (a zombie has)."""
    return _process(pid) is not None


def _process(pid: int) -> Process | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[-1].split()
    except OSError:
        return None
    if not fields or fields[0] in ("Z", "X"):  # ended, waiting to be reaped
        return None
    return Process(pid, int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))


def _table() -> list[Process]:
    found = []
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if name.isdigit():
                process = _process(int(name))
                if process is not None:
                    found.append(process)
    return found


def record_group(group: int) -> None:
    """Keep `group` (a server's process group) to end at exit, whatever becomes of its leader."""
    with _lock:
        _groups.add(group)


def family(groups: Iterable[int]) -> set[Process]:
    """Every live process in `groups` or in their sessions, and every descendant of those."""
    wanted = set(groups) - {os.getpgrp(), os.getsid(0)}  # never ocat's own
    if not wanted:
        return set()
    table = [p for p in _table() if p.pid != os.getpid()]
    found = {p for p in table if p.group in wanted or p.session in wanted}
    below: dict[int, list[Process]] = {}
    for process in table:
        below.setdefault(process.ppid, []).append(process)
    todo = list(found)
    while todo:
        for child in below.get(todo.pop().pid, []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def end_at_exit(processes: Iterable[Process]) -> None:
    """Keep `processes` (a family taken before its server was stopped) to end at exit as well."""
    with _lock:
        _known.update(processes)


def end(groups: Iterable[int], known: Iterable[Process] = (), grace: float = GRACE_SECONDS) -> None:
    """End the families of `groups` and the processes of `known` still alive: SIGTERM, up to
    `grace` seconds for them to go, then SIGKILL. Groups found empty are forgotten."""
    groups = set(groups)
    known = set(known)

    def left() -> set[Process]:
        return family(groups) | {p for p in known if _same(p)}

    if not left():
        _forget(groups)
        with _lock:
            _known.difference_update(known)
        return
    for how in (signal.SIGTERM, signal.SIGKILL):
        _signal(left(), groups, how)
        deadline = time.monotonic() + (grace if how == signal.SIGTERM else GRACE_SECONDS)
        while left() and time.monotonic() < deadline:
            time.sleep(_POLL_SECONDS)
        if not left():
            break
    _forget({g for g in groups if not family({g})})
    with _lock:
        _known.difference_update(p for p in known if not _same(p))


def end_all(grace: float = GRACE_SECONDS) -> None:
    """End every recorded server's family (ocat is leaving: after a close, or instead of one)."""
    with _lock:
        groups, known = set(_groups), set(_known)
    if groups or known:
        end(groups, known | family(groups), grace)


def _signal(processes: set[Process], groups: set[int], how: signal.Signals) -> None:
    live_groups = {p.group for p in processes} & groups
    for group in live_groups:  # the whole group at once: a child forked since the look is in it too
        with contextlib.suppress(OSError):
            os.killpg(group, how)
    for process in processes:
        if process.group not in live_groups and _same(process):
            with contextlib.suppress(OSError):
                os.kill(process.pid, how)


def _same(process: Process) -> bool:
    """Whether `process` still runs (its pid not given to another since: the same start time)."""
    now = _process(process.pid)
    return now is not None and now.started == process.started


def _forget(groups: set[int]) -> None:
    with _lock:
        _groups.difference_update(groups)


def kill_on_sigterm() -> None:
    """On SIGTERM, end the servers' families (SIGTERM, a grace, SIGKILL), then die of SIGTERM as
    before (only when nothing else handles it, and only from the main thread, where handlers are set)."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def on_term(signum: int, frame: Any) -> None:
        end_all()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_term)
