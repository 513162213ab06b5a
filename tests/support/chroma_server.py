"""A real Chroma server (`chroma run`, from the installed chromadb) on loopback, for the tests.

It can be stopped and started again on the same port and data, as a server on another machine
goes away and comes back. The `chroma_server` fixture (tests/conftest.py) yields its location.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

from ocat.memory import StoreLocation
from ocat.memory.storage.chroma import server_answers

START_SECONDS = 60.0


def free_port() -> int:
    """A TCP port free on loopback now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# What `chroma run` does, without the rest: the `chroma` command is a Python script that imports
# all of chromadb (~2 s of CPU, 12 s under load here) only to hand its arguments to the Rust
# server in chromadb_rust_bindings; this calls the same function with the same arguments, so the
# server is the one a user's `chroma run` starts, up in well under a second.
SERVE = "import sys, chromadb_rust_bindings; chromadb_rust_bindings.cli(['chroma', *sys.argv[1:]])"


def chroma_command() -> list[str]:
    """The command that starts the `chroma` CLI of the installed chromadb, arguments to follow."""
    return [sys.executable, "-c", SERVE]


class ChromaServer:
    """`chroma run --path DATA --host 127.0.0.1 --port PORT`, started and stopped on demand."""

    def __init__(self, data: Path, port: int | None = None) -> None:
        self.data = data
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def location(self) -> StoreLocation:
        """Where ocat reaches it directly (plain HTTP on loopback)."""
        return StoreLocation(host="127.0.0.1", port=self.port)

    @property
    def url(self) -> str:
        """Its address as `vector_store.url` takes it."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ChromaServer:
        """Start it and wait until it answers its heartbeat (the same port and data as before)."""
        command = [*chroma_command(), "run", "--path", str(self.data), "--host", "127.0.0.1", "--port", str(self.port)]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + START_SECONDS
        while not server_answers("127.0.0.1", self.port, timeout=1.0):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"chroma run did not answer on port {self.port} within {START_SECONDS:g} s")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        """Stop it (SIGTERM, then SIGKILL) and wait until it is gone; its data stays."""
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)
        self.process = None
