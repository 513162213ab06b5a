"""The store's server child: ChromaDB's own `chroma run` on loopback, started and stopped.

A serving owner (ocat.memory.sharing.owner_lock) runs one for the other processes; the child carries a
watchdog that ends it as soon as its owner is gone, even after kill -9.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from ocat.errors import StoreError

SERVER_START_SECONDS = 60.0


# The server process: ChromaDB's own `chroma run`, plus a watchdog that ends it as soon as
# the owner is gone (even after kill -9), so an orphan never keeps the folder open while a
# new owner starts another server on it. (PR_SET_PDEATHSIG would follow the starting
# *thread*, and the chat starts the server from a worker thread.)
# `chroma run` is ChromaDB's Rust server: called as chromadb.cli.cli.app calls it, without
# importing chromadb's Python package (~70 MB and a second of start-up this child never uses:
# docs/PERFORMANCE.md, "Idle memory").
_SERVER_CODE = """
import os, sys, threading, time
path, port, owner = sys.argv[1], sys.argv[2], int(sys.argv[3])
def watch():
    while os.getppid() == owner:
        time.sleep(0.5)
    os._exit(0)
threading.Thread(target=watch, daemon=True).start()
import chromadb_rust_bindings
try:
    chromadb_rust_bindings.cli(["chroma", "run", "--path", path, "--host", "127.0.0.1", "--port", port])
except KeyboardInterrupt:
    pass
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(path: Path, stop: Callable[[], bool] | None = None) -> tuple[subprocess.Popen[bytes], int]:
    """Start the server child on a free loopback port; returns it and its port once it listens.

    A port is free when chosen, not when the child binds it a second later: another process
    starting a server meanwhile can take it, and its server would then answer this one's
    probe, for another store. So the listener on the port must be this child; when it is
    another process's, this child (which cannot bind) is stopped and a new port chosen."""
    for _ in range(PORT_ATTEMPTS - 1):
        try:
            return _start_on_a_port(path, stop)
        except _PortTaken:
            continue
    return _start_on_a_port(path, stop)


class _PortTaken(Exception):
    """The chosen port was bound by another process before the child could bind it."""


# Tries before giving up on ports another process keeps taking first (it has never needed two).
PORT_ATTEMPTS = 3


def _start_on_a_port(path: Path, stop: Callable[[], bool] | None) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVER_CODE, str(path), str(port), str(os.getpid())],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        # Kept to explain a failed start (a damaged store), then drained so the server never blocks on it.
        stderr=subprocess.PIPE,
        # A process group of its own: Ctrl+C in the terminal goes to the chat's group, and the
        # chat still writes its last exchange through this server as it leaves (it is stopped by
        # its owner, or by its watchdog once the owner is gone, never by the terminal's keys).
        process_group=0,
    )
    deadline = time.monotonic() + SERVER_START_SECONDS
    while time.monotonic() < deadline:
        if stop is not None and stop():
            stop_server(server, kill=True)
            raise StoreError(f"the store at {path} was closed while its server was starting")
        if server.poll() is not None:
            assert server.stderr is not None
            reason = _last_line(server.stderr.read().decode("utf-8", "replace"))
            raise StoreError(
                f"cannot open the memory store at {path}: its server exited at start (code {server.returncode})"
                + (f": {reason}" if reason else "")
            )
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                if listens_on(server.pid, port) is False:
                    stop_server(server, kill=True)
                    raise _PortTaken(port)
                threading.Thread(target=_drain, args=(server.stderr,), daemon=True).start()
                return server, port
        time.sleep(0.1)
    stop_server(server, kill=True)
    raise StoreError(f"the memory server for {path} did not start within {SERVER_START_SECONDS:.0f} s")


def listens_on(pid: int, port: int) -> bool | None:
    """Whether process `pid` holds the socket listening on loopback `port` (None: this system
    does not say; Linux does, in /proc)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            # local address "HEXIP:HEXPORT", state 0A is LISTEN, the tenth field the socket's inode
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return None
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                return True
        except OSError:  # closed meanwhile (the listing's own descriptor, for one)
            continue
    return False


def stop_server(server: subprocess.Popen[bytes] | None, *, kill: bool = False) -> None:
    """End a server child and reap it. A stopped one is woken, or SIGTERM would wait for SIGCONT."""
    if server is None or server.poll() is not None:
        return
    if kill:
        server.kill()
    else:
        server.terminate()
        if hasattr(signal, "SIGCONT"):
            try:
                os.kill(server.pid, signal.SIGCONT)
            except OSError:
                pass
    try:
        server.wait(timeout=15)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def _last_line(output: str) -> str:
    """The last non-empty line of a failed server's output (its error, after any traceback)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[-1][:500] if lines else ""


def _drain(stream: Any) -> None:
    while stream.read(65536):
        pass
