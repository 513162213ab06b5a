"""One owner per embedded store: a whole-lifetime lock, and a Chroma server for the others.

ChromaDB's embedded mode is not safe for several processes on one folder: a long-lived
process keeps the vector index in memory and later writes it back over what another
process added. So exactly one process opens a folder with the embedded client:

- the process holding `<store>/.ocat-owner.lock` is the owner, and says who it is in
  `<store>/.ocat-owner.json` (its pid, its command, whether it shares the store);
- a long-lived owner (the chat) serves the folder with ChromaDB's own server on loopback,
  records the address in `<store>/.ocat-server.json`, uses it itself through HTTP, and
  starts a new server if that one exits;
- any other process that finds the lock taken uses that server if it answers, or waits
  for the lock, saying whom it waits for (a one-shot owner, such as `--add-to-vector-store`,
  serves nobody; a stopped owner's server does not answer).

The lock is an OS file lock (filelock): a crashed owner's lock goes with its process, and
the server child is killed with its parent, so a crash never wedges the store. The two
files are believed only while the lock is held (the address only once a server answers
there), so what a crash leaves behind misleads nobody.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ocat.errors import StoreError
from ocat.memory.storage.chroma import HEARTBEAT_SECONDS, server_answers
from ocat.memory.storage.location import StoreLocation
from ocat.memory.sharing.lock_holders import (
    LOCK_FILE,
    OWNER_FILE,
    duration_words,
    lock_is_held,
)
from ocat.memory.sharing.chroma_server import start_server, stop_server
from ocat.memory.sharing.owner_files import (
    SERVER_FILE,
    handing_over,
    read_server,
    why_busy,
    write_owner,
    write_server,
)

if TYPE_CHECKING:
    from filelock import FileLock

# What every note of a wait for another process's store says.
WAITING_FOR_THE_STORE = "waiting for the store at"
# How often a process waiting for the store says again what it waits for, and for how long.
NOTIFY_EVERY_SECONDS = 30.0
# `recover` restarts a server child that does not answer for this long (a busy one answers
# its heartbeat within 0.2 s: see ocat.memory.storage.chroma).
UNANSWERED_SECONDS = 10.0
# A server child that exits more often than this within RESTART_WINDOW_SECONDS is not
# started again: the owner gives the store up instead, so other processes are not kept waiting.
MAX_RESTARTS = 3
RESTART_WINDOW_SECONDS = 60.0
# How long a process waiting for a closing owner waits without a word: the owner's server gets
# 15 s to stop (ocat.memory.sharing.chroma_server.stop_server), and a chat that quits hands over
# in about a second; past this, the wait is said as any other.
HANDOVER_SECONDS = 20.0


class StoreWait(str):
    """A note that opening waits for another process's store: the text `notify` hears, of a kind
    a listener can tell from other notes by its type, not its words (the chat's header then
    says "memory waiting…")."""

    __slots__ = ()


@dataclass
class StoreLease:
    """How this process reaches a store folder, and what to undo when it is done."""

    location: StoreLocation
    role: str  # "owner" (embedded client), "serving owner" or "client" (through the owner's server)
    _lock: FileLock | None = None
    _server: subprocess.Popen[bytes] | None = None
    _released: bool = field(default=False)
    # Why this serving owner gave the store up (its server could not be kept running), if it did.
    problem: str | None = None
    _keep_serving: bool = True
    # Held while the server child is replaced or the lease released (from any thread).
    _guard: threading.RLock = field(default_factory=threading.RLock, repr=False)
    _exits: list[float] = field(default_factory=list, repr=False)

    @property
    def server_process(self) -> subprocess.Popen[bytes] | None:
        """A serving owner's server child as it is now (None for an embedded owner, a client, or
        once released). Read-only: for tests and diagnostics that stop or kill it to see the lease cope."""
        return self._server

    @property
    def _path(self) -> Path:
        assert self.location.path is not None, "a lease is always on a store folder"
        return self.location.path

    def server_alive(self, timeout: float = HEARTBEAT_SECONDS) -> bool:
        """Whether this lease still reaches the store: for an embedded owner, until released;
        for a serving owner or a client, whether the server answers a heartbeat within
        `timeout` seconds (and, for a serving owner, its server child is still running)."""
        if self._released or self.problem is not None:
            return False
        location, server = self.location, self._server
        if location.host is None:
            return True
        if server is not None and server.poll() is not None:
            return False
        return server_answers(location.host, location.port, timeout)

    def restart_server(self) -> StoreLocation:
        """A serving owner's new server child on the same folder; returns its location.

        What is left of the old child (exited, stopped or stuck) is killed first, so two
        servers never have the folder open; then `location` and `.ocat-server.json` name the
        new server. If it cannot start, this process gives the store up (see `problem`):
        it releases the lock so that another process can take over, and raises StoreError.
        """
        with self._guard:
            self._check_serving()
            path = self._path
            # Meanwhile other processes wait for the new address instead of adopting a dead one.
            (path / SERVER_FILE).unlink(missing_ok=True)
            stop_server(self._server, kill=True)
            try:
                server, port = start_server(path, stop=lambda: self._released)
            except StoreError as exc:
                self._give_up(str(exc))
                raise
            self._server = server
            self.location = StoreLocation(path=path, host="127.0.0.1", port=port)
            write_server(path, port, server.pid)
            self._watch(server)
            return self.location

    def recover(self, timeout: float = UNANSWERED_SECONDS) -> StoreLocation:
        """Where the store can be reached now, after a call through this lease failed.

        An embedded owner: its folder, unchanged. A serving owner: its server, restarted
        first if its child has exited or does not answer within `timeout` seconds. A client:
        the owner's server as `.ocat-server.json` names it now (the owner may have restarted
        it on another port), if it answers. Compare the result with the location the store
        was opened at: if it differs, open the store there again.

        Raises StoreError when this lease cannot reach the store any more (a client whose
        owner has finished or does not answer, a serving owner that gave the store up, a
        released lease): then close the store and open it again with `open_store`.
        """
        path = self._path
        if self._released:
            raise StoreError(f"the store at {path} was closed; open it again")
        if self.role == "owner":
            return self.location
        if self.role == "serving owner":
            with self._guard:
                if not self.server_alive(timeout):
                    self.restart_server()
                return self.location
        if not lock_is_held(path):
            raise StoreError(f"the process that shared the store at {path} has finished with it; open it again")
        served = read_server(path)
        if served is None:
            raise StoreError(f"the process that owns the store at {path} no longer serves it: {why_busy(path)}")
        self.location = StoreLocation(path=path, host=served[0], port=served[1])
        return self.location

    def release(self) -> None:
        """Stop serving and give the store up (idempotent, from any thread)."""
        self._released = True  # first: a server start under way sees it and stops
        with self._guard:
            self._let_go()

    def _check_serving(self) -> None:
        path = self._path
        if self._released:
            raise StoreError(f"the store at {path} was closed; open it again")
        if self.problem is not None:
            raise StoreError(f"this process gave up the store at {path} ({self.problem}); open it again")
        if self.role != "serving owner":
            raise StoreError(f"this process does not serve the store at {path}")

    def _watch(self, server: subprocess.Popen[bytes]) -> None:
        if self._keep_serving:
            threading.Thread(
                target=self._restart_when_exited, args=(server,), name="ocat-store-server", daemon=True
            ).start()

    def _restart_when_exited(self, server: subprocess.Popen[bytes]) -> None:
        # Without this, a killed or crashed server would leave the lock held by an owner that
        # serves nobody, and every other process would wait for it until it quits.
        code = server.wait()
        with self._guard:
            if self._released or self.problem is not None or self._server is not server:
                return  # released, given up, or replaced by restart_server meanwhile
            now = time.monotonic()
            self._exits = [t for t in self._exits if now - t < RESTART_WINDOW_SECONDS] + [now]
            if len(self._exits) > MAX_RESTARTS:
                self._give_up(f"its memory server exited {len(self._exits)} times within a minute (last code {code})")
                return
            try:
                self.restart_server()
            except StoreError:
                pass  # restart_server gave the store up and recorded why in `problem`

    def _give_up(self, problem: str) -> None:
        if self._released:
            return
        self.problem = problem
        self._let_go()

    def _let_go(self) -> None:
        # Each step once: the address goes before the server, the owner record before the lock.
        server, self._server = self._server, None
        lock, self._lock = self._lock, None
        path = self._path
        if lock is not None and server is not None:
            # Stopping the server takes a moment (up to its 15 s grace); a process that finds the
            # store held meanwhile waits quietly for the handover instead of saying it waits.
            write_owner(path, serves=True, closing=True)
        if server is not None:
            (path / SERVER_FILE).unlink(missing_ok=True)
            stop_server(server)
        if lock is not None:
            (path / OWNER_FILE).unlink(missing_ok=True)
            lock.release()


def acquire(
    path: Path,
    *,
    serve: bool,
    wait_seconds: float = 600.0,
    notify: Callable[[str], None] | None = None,
    keep_serving: bool = True,
) -> StoreLease:
    """Take the store folder as its owner, or reach it through its owner's server.

    `serve` makes an owner share the store (for long-lived processes); with `keep_serving`
    it starts a new server whenever its server exits. A process that finds the store held
    and no server answering for it waits up to `wait_seconds` for the lock, telling `notify`
    what it waits for (which process, and why), again whenever that changes, and every
    NOTIFY_EVERY_SECONDS with how long it has waited.
    """
    from filelock import FileLock, Timeout

    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot use {path} as a memory store: {exc.strerror or exc}") from exc
    _check_lock_file(path / LOCK_FILE)
    # Not thread-local: the chat opens the store in a worker thread and releases it from the main one.
    lock = FileLock(str(path / LOCK_FILE), thread_local=False)
    started = time.monotonic()
    told: str | None = None
    told_at = 0.0
    while True:
        try:
            lock.acquire(timeout=0)
        except Timeout:  # (a subclass of OSError, so it comes first)
            # filelock retries a failed create as if it were contention; a lock file that is not
            # there is held by nobody, so this is no wait but a failure.
            _check_lock_file(path / LOCK_FILE)
            served = read_server(path)
            if served is not None:
                host, port = served
                return StoreLease(StoreLocation(path=path, host=host, port=port), "client")
            why = why_busy(path)
            waited = time.monotonic() - started
            # An owner that is closing hands the store over in a moment: that is no wait worth a word.
            quiet = handing_over(path) and waited < HANDOVER_SECONDS
            # Told before the deadline is checked: probing a stopped server can take longer than a short wait.
            if notify and wait_seconds > 0 and not quiet and (
                why != told or time.monotonic() - told_at >= NOTIFY_EVERY_SECONDS
            ):
                if told is None:
                    notify(StoreWait(
                        f"{WAITING_FOR_THE_STORE} {path}: {why}. ocat waits up to {duration_words(wait_seconds)} "
                        "(Ctrl+C or quit to give up)…"
                    ))
                else:
                    notify(StoreWait(
                        f"still {WAITING_FOR_THE_STORE} {path} after {duration_words(waited)} "
                        f"(up to {duration_words(wait_seconds)}; Ctrl+C or quit to give up): {why}…"
                    ))
                told, told_at = why, time.monotonic()
            if waited >= wait_seconds:
                raise StoreError(
                    f"the store at {path} is busy: {why}. Waited {duration_words(wait_seconds)}; "
                    "try again when it is free"
                ) from None
            time.sleep(0.2)
            continue
        except OSError as exc:
            raise StoreError(f"cannot lock the memory store at {path}: {exc.strerror or exc}") from exc
        lease = StoreLease(StoreLocation(path=path), "owner", _lock=lock, _keep_serving=keep_serving)
        try:
            write_owner(path, serves=serve)
            (path / SERVER_FILE).unlink(missing_ok=True)  # left by an owner that crashed
            if serve:
                lease.role = "serving owner"
                server, port = start_server(path)
                lease._server = server
                lease.location = StoreLocation(path=path, host="127.0.0.1", port=port)
                write_server(path, port, server.pid)
                lease._watch(server)
        except BaseException:
            lease.release()
            raise
        atexit.register(lease.release)
        return lease


def _check_lock_file(lock_path: Path) -> None:
    """Make sure the lock file exists and can be opened for writing, or raise StoreError at once.

    Only a lock another process holds is worth waiting for: filelock reads a create that fails
    with ENOENT (a store under /proc/self, a folder removed meanwhile) as contention and would
    retry it for the whole wait, which ocat reported as "another ocat process holds it".
    """
    try:
        handle = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StoreError(f"cannot create the store's lock file {lock_path}: {exc.strerror or exc}") from exc
    os.close(handle)
