"""One owner per embedded store: a whole-lifetime lock, and a Chroma server for the others.

ChromaDB's embedded mode is not safe for several processes on one folder: a long-lived
process keeps the vector index in memory and later writes it back over what another
process added. So exactly one process opens a folder with the embedded client:

- the process holding `<store>/.ocat-owner.lock` is the owner;
- a long-lived owner (the chat) serves the folder with ChromaDB's own server on loopback,
  records the address in `<store>/.ocat-server.json`, and uses it itself through HTTP;
- any other process that finds the lock taken uses that server if there is one, or waits
  for the lock (a one-shot owner, such as `--add-to-vector-store`, serves nobody).

The lock is an OS file lock (filelock): a crashed owner's lock goes with its process, and
the server child is killed with its parent, so a crash never wedges the store.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ocat.errors import StoreError
from ocat.memory.backend import StoreLocation

LOCK_FILE = ".ocat-owner.lock"
SERVER_FILE = ".ocat-server.json"
SERVER_START_SECONDS = 60.0

# The server process: ChromaDB's own `chroma run`, plus a watchdog that ends it as soon as
# the owner is gone (even after kill -9), so an orphan never keeps the folder open while a
# new owner starts another server on it. (PR_SET_PDEATHSIG would follow the starting
# *thread*, and the chat starts the server from a worker thread.)
_SERVER_CODE = """
import os, sys, threading, time
path, port, owner = sys.argv[1], sys.argv[2], int(sys.argv[3])
def watch():
    while os.getppid() == owner:
        time.sleep(0.5)
    os._exit(0)
threading.Thread(target=watch, daemon=True).start()
from chromadb.cli.cli import app
sys.argv = ["chroma", "run", "--path", path, "--host", "127.0.0.1", "--port", port]
app()
"""


@dataclass
class StoreLease:
    """How this process reaches a store folder, and what to undo when it is done."""

    location: StoreLocation
    role: str  # "owner" (embedded client), "serving owner" or "client" (through the owner's server)
    _lock: Any = None
    _server: subprocess.Popen[bytes] | None = None
    _released: bool = field(default=False)

    def release(self) -> None:
        """Stop serving and give the store up (idempotent)."""
        if self._released:
            return
        self._released = True
        if self._server is not None:
            server_file = Path(str(self.location.path)) / SERVER_FILE
            server_file.unlink(missing_ok=True)
            self._server.terminate()
            try:
                self._server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._server.kill()
        if self._lock is not None:
            self._lock.release()


def acquire(
    path: Path, *, serve: bool, wait_seconds: float = 600.0, notify: Callable[[str], None] | None = None
) -> StoreLease:
    """Take the store folder as its owner, or reach it through its owner's server.

    `serve` makes an owner share the store (for long-lived processes). A process that
    finds a non-serving owner waits up to `wait_seconds` for it to finish.
    """
    from filelock import FileLock, Timeout

    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot use {path} as a memory store: {exc.strerror or exc}") from exc
    # Not thread-local: the chat opens the store in a worker thread and releases it from the main one.
    lock = FileLock(str(path / LOCK_FILE), thread_local=False)
    deadline = time.monotonic() + wait_seconds
    told = False
    while True:
        try:
            lock.acquire(timeout=0)
        except Timeout:  # (a subclass of OSError, so it comes first)
            served = _read_server(path)
            if served is not None:
                host, port = served
                return StoreLease(StoreLocation(path=path, host=host, port=port), "client")
            if time.monotonic() >= deadline:
                raise StoreError(
                    f"the store at {path} is busy: another ocat process is using it and does not share it; "
                    "try again when it finishes"
                ) from None
            if notify and not told:
                notify(f"waiting for another ocat process to finish with the store at {path}…")
                told = True
            time.sleep(0.2)
            continue
        except OSError as exc:
            raise StoreError(f"cannot lock the memory store at {path}: {exc.strerror or exc}") from exc
        (path / SERVER_FILE).unlink(missing_ok=True)  # left by an owner that crashed
        lease = StoreLease(StoreLocation(path=path), "owner", _lock=lock)
        if serve:
            try:
                lease._server, port = _start_server(path)
            except Exception:
                lock.release()
                raise
            lease.location = StoreLocation(path=path, host="127.0.0.1", port=port)
            lease.role = "serving owner"
            _write_server(path, port)
        atexit.register(lease.release)
        return lease


def _read_server(path: Path) -> tuple[str, int] | None:
    try:
        info = json.loads((path / SERVER_FILE).read_text(encoding="utf-8"))
        host, port = str(info["host"]), int(info["port"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    with socket.socket() as probe:
        probe.settimeout(1.0)
        if probe.connect_ex((host, port)) != 0:
            return None
    return host, port


def _write_server(path: Path, port: int) -> None:
    target = path / SERVER_FILE
    partial = target.with_suffix(".partial")
    partial.write_text(json.dumps({"host": "127.0.0.1", "port": port, "pid": os.getpid()}), encoding="utf-8")
    partial.replace(target)  # readers never see half a file


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_server(path: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVER_CODE, str(path), str(port), str(os.getpid())],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        # Kept to explain a failed start (a damaged store), then drained so the server never blocks on it.
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + SERVER_START_SECONDS
    while time.monotonic() < deadline:
        if server.poll() is not None:
            assert server.stderr is not None
            reason = _last_line(server.stderr.read().decode("utf-8", "replace"))
            raise StoreError(
                f"cannot open the memory store at {path}: its server exited at start (code {server.returncode})"
                + (f": {reason}" if reason else "")
            )
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                threading.Thread(target=_drain, args=(server.stderr,), daemon=True).start()
                return server, port
        time.sleep(0.1)
    server.kill()
    raise StoreError(f"the memory server for {path} did not start within {SERVER_START_SECONDS:.0f} s")


def _last_line(output: str) -> str:
    """The last non-empty line of a failed server's output (its error, after any traceback)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[-1][:500] if lines else ""


def _drain(stream: Any) -> None:
    while stream.read(65536):
        pass
