"""A model archive built from ../shared/models in ChromaDB's layout, and a loopback server for
it whose routes each behave as a server can (whole, cut off, silent, gated, not HTTP ...).
The fixtures `model_archive` and `server` (tests/conftest.py) are built from these."""

from __future__ import annotations

import hashlib
import tarfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

from tests.support import MODEL_DIR

# Listed here rather than taken from the module under test, so a file it forgot shows up.
MODEL_FILE_NAMES = (
    "config.json",
    "model.onnx",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
)
FETCH_COMMAND = "ocat --fetch-model"
# A host that cannot be resolved, as offline: `.invalid` never resolves (RFC 2606), at once.
OFFLINE_URL = "https://chroma-onnx-models.invalid/all-MiniLM-L6-v2/onnx.tar.gz"


def assert_names_the_ways_without_internet(message: str) -> None:
    """Offline, retrying the download cannot help: the message names what works without internet
    (the three ways of docs/configuration.md) instead."""
    assert "Retry with" not in message
    assert "embedding.model_path" in message and "OCAT_EMBEDDING_MODEL_PATH" in message  # a copied folder
    assert f"OCAT_EMBEDDING_DOWNLOAD_URL=file:///path/to/onnx.tar.gz {FETCH_COMMAND}" in message  # a carried archive
    assert "mirror" in message and "embedding.download_url" in message  # a mirror on the network
    assert "docs/configuration.md" in message


# Long enough for any teardown, short enough that a bug cannot hang the suite for good.
HANDLER_WAIT = 60.0


@dataclass(frozen=True)
class Archive:
    """A model archive laid out as ChromaDB's (`onnx/<file>`), and its SHA-256."""

    path: Path
    data: bytes
    sha256: str


def build_archive(path: Path) -> Archive:
    """Write ChromaDB's archive layout to `path`, from the real model files in ../shared/models."""
    # compresslevel=0: the tests need a real .tar.gz (gzip's header, stored blocks and checksum),
    # not a small one; the int8 model hardly compresses (23.6 MB -> 21.4 at level 1), and level
    # 1 took 0.94 s of CPU per test worker against 0.06.
    with tarfile.open(path, "w:gz", compresslevel=0) as tar:
        tar.add(MODEL_DIR, arcname="onnx", recursive=False)
        for name in MODEL_FILE_NAMES:
            tar.add(MODEL_DIR / name, arcname=f"onnx/{name}")
    data = path.read_bytes()
    return Archive(path, data, hashlib.sha256(data).hexdigest())


@dataclass
class ArchiveServer:
    """A local server for the archive. Each route is one way a server behaves (see `_handler_for`)."""

    archive: Archive
    port: int = 0
    # The path of every request received, in order.
    requests: list[str] = field(default_factory=list)
    # Set at teardown: handlers that hold a connection open return at once.
    release: threading.Event = field(default_factory=threading.Event)
    # Set by a test: the `gated` route sends the rest of the archive.
    gate: threading.Event = field(default_factory=threading.Event)

    def url(self, route: str = "") -> str:
        """The archive's address on `route` (the plain route serves it whole)."""
        return f"http://127.0.0.1:{self.port}/{route}{'/' if route else ''}onnx.tar.gz"


def _handler_for(state: ArchiveServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def do_GET(self) -> None:
            state.requests.append(self.path)
            data = state.archive.data
            route = self.path.rsplit("/", 1)[0].strip("/")
            if route == "":
                self._head(200, len(data))
                self.wfile.write(data)
            elif route == "half":
                # The whole size announced, half sent, then the connection closes.
                self._head(200, len(data))
                self.wfile.write(data[: len(data) // 2])
                self.close_connection = True
            elif route == "half-unsized":
                # No size announced: only the checksum can tell the download is short.
                self._head(200, None)
                self.wfile.write(data[: len(data) // 2])
                self.close_connection = True
            elif route == "half-chunked":
                self._chunked_then_close(data[: len(data) // 2])
            elif route == "not-http":
                # Something else listens on the port (an SSH server, say): no HTTP status line.
                self.wfile.write(b"SSH-2.0-OpenSSH_9.6\r\n")
                self.close_connection = True
            elif route == "gated":
                # Half now, the rest once the test opens the gate: a download the test can hold.
                self._head(200, len(data))
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                state.gate.wait(HANDLER_WAIT)
                self.wfile.write(data[len(data) // 2 :])
            elif route == "missing":
                self.send_error(404, "Not Found")
            elif route == "silent":
                # Accepts the connection, never answers.
                state.release.wait(HANDLER_WAIT)
                self.close_connection = True
            elif route == "stall":
                # Answers, sends a first part, then goes quiet.
                self._head(200, len(data))
                self.wfile.write(data[: len(data) // 4])
                self.wfile.flush()
                state.release.wait(HANDLER_WAIT)
                self.close_connection = True
            else:
                self.send_error(500, f"unknown route {route!r}")

        def _head(self, status: int, length: int | None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/gzip")
            if length is not None:
                self.send_header("Content-Length", str(length))
            self.send_header("Connection", "close")
            self.end_headers()

        def _chunked_then_close(self, data: bytes) -> None:
            # Raw HTTP/1.1 with chunked transfer encoding, cut off before the last chunk.
            self.wfile.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/gzip\r\n"
                b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            )
            for start in range(0, len(data), 1 << 16):
                piece = data[start : start + (1 << 16)]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.close_connection = True

    return Handler


@contextmanager
def serving_archive(archive: Archive) -> Iterator[ArchiveServer]:
    """The archive served on loopback until the block ends; handlers still waiting are then released."""
    state = ArchiveServer(archive)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(state))
    state.port = httpd.server_address[1]
    # A short poll: shutdown() waits up to one poll interval, and every test starts a server.
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        state.gate.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def served_env(server: ArchiveServer) -> dict[str, str | None]:
    """Environment for an ocat subprocess that fetches the model from the local server."""
    return {
        "OCAT_EMBEDDING_MODEL_PATH": None,
        "OCAT_EMBEDDING_DOWNLOAD_URL": server.url(),
        "OCAT_EMBEDDING_DOWNLOAD_SHA256": server.archive.sha256,
    }


def assert_same_files(folder: Path) -> None:
    """The folder holds the six model files, byte for byte as in ../shared/models."""
    for name in MODEL_FILE_NAMES:
        assert (folder / name).read_bytes() == (MODEL_DIR / name).read_bytes(), f"{name} differs"


def assert_nothing_left(target: Path) -> None:
    """No model folder, and beside it no partial archive or staging folder (the lock may stay)."""
    assert not target.exists(), f"{target} was left behind"
    if target.parent.exists():
        leftovers = sorted(p.name for p in target.parent.iterdir() if not p.name.endswith(".lock"))
        assert leftovers == [], f"left beside {target}: {leftovers}"
