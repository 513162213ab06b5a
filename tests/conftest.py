"""Shared fixtures: an isolated home, a fake and a real embedder, stores, the CLI as a subprocess,
and a local OpenAI-compatible server so LLM calls never leave the machine."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator, Sequence

import pytest

# The model archive and its loopback server (fixtures `model_archive`, `server`).
pytest_plugins = ["tests.model_server"]

REPO = Path(__file__).resolve().parent.parent
MODEL_DIR = Path(
    os.environ.get("OCAT_EMBEDDING_MODEL_PATH") or REPO.parent / "shared" / "models" / "all-MiniLM-L6-v2-int8"
)


# Port 9 (discard) has no listener here: a connection to it is refused at once.
CLOSED_URL = "http://127.0.0.1:9/no-downloads-in-tests/onnx.tar.gz"


class FakeEmbedder:
    """Deterministic bag-of-words vectors: texts sharing words are close. For fast unit tests."""

    def __init__(self, name: str = "fake-embedder", dimensions: int = 64) -> None:
        self.name = name
        self.dimensions = dimensions
        self.calls: list[int] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(len(texts))
        vectors = []
        for text in texts:
            vector = [0.0] * self.dimensions
            for word in re.findall(r"\w+", text.lower()):
                digest = hashlib.sha256(word.encode()).digest()
                vector[int.from_bytes(digest[:4], "big") % self.dimensions] += 1.0
            norm = math.sqrt(sum(x * x for x in vector)) or 1.0
            vectors.append([x / norm for x in vector] if any(vector) else [1.0] + [0.0] * (self.dimensions - 1))
        return vectors


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own HOME and XDG folders, so no real user file is read or written."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    for var, sub in (("XDG_CONFIG_HOME", ".config"), ("XDG_DATA_HOME", ".local/share"), ("XDG_CACHE_HOME", ".cache")):
        monkeypatch.setenv(var, str(home / sub))
    for name in list(os.environ):
        if name.startswith("OCAT_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("OCAT_EMBEDDING_MODEL_PATH", str(MODEL_DIR))
    # Should a test ever look for the model elsewhere, its download goes to a closed port on
    # loopback (refused at once), never to the internet.
    monkeypatch.setenv("OCAT_EMBEDDING_DOWNLOAD_URL", CLOSED_URL)
    # Dates on screen are local time: pin the zone so pictures match on every machine.
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    return home


@pytest.fixture
def model_in_chroma_cache(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The model where a user's machine has it (ChromaDB's cache in the test's home), not named
    by OCAT_EMBEDDING_MODEL_PATH: screens then show the same path on every machine."""
    from ocat.memory.model_files import chroma_model_dir

    folder = chroma_model_dir()
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.symlink_to(MODEL_DIR, target_is_directory=True)
    monkeypatch.delenv("OCAT_EMBEDDING_MODEL_PATH")
    return folder


@pytest.fixture
def fake_embedder() -> FakeEmbedder:
    """A fresh fake embedder."""
    return FakeEmbedder()


@pytest.fixture(scope="session")
def real_embedder() -> Any:
    """The real all-MiniLM-L6-v2 int8 model from ../shared/models (shared by all tests)."""
    from ocat.memory.embeddings import OnnxMiniLMEmbedder

    if not (MODEL_DIR / "model.onnx").is_file():
        pytest.fail(f"the embedding model is missing: {MODEL_DIR} (set OCAT_EMBEDDING_MODEL_PATH)")
    return OnnxMiniLMEmbedder(MODEL_DIR)


@pytest.fixture
def store(tmp_path: Path, fake_embedder: FakeEmbedder) -> Any:
    """An empty store on disk with the fake embedder."""
    from ocat.memory import MemoryStore, StoreLocation

    return MemoryStore.open(StoreLocation(path=tmp_path / "store"), fake_embedder, name="test")


@pytest.fixture
def real_store(tmp_path: Path, real_embedder: Any) -> Any:
    """An empty store on disk with the real embedding model."""
    from ocat.memory import MemoryStore, StoreLocation

    return MemoryStore.open(StoreLocation(path=tmp_path / "real-store"), real_embedder, name="test")


@dataclass
class CliResult:
    """What a CLI run printed and returned."""

    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        """stdout as one JSON document."""
        return json.loads(self.stdout)

    def json_lines(self) -> list[Any]:
        """stdout as JSON Lines."""
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]


@dataclass
class Cli:
    """Runs `python -m ocat` in a subprocess against a private store."""

    home: Path
    store_path: Path
    env: dict[str, str] = field(default_factory=dict)

    def __call__(self, *args: str, input: str | None = None, env: dict[str, str | None] | None = None) -> CliResult:
        """Run ocat with args; env values of None remove that variable."""
        merged = {**os.environ, "OCAT_VECTOR_STORE_PATH": str(self.store_path), **self.env, **(env or {})}
        full_env = {k: v for k, v in merged.items() if v is not None}
        completed = subprocess.run(
            [sys.executable, "-m", "ocat", *args],
            input=input if input is not None else "",
            capture_output=True,
            text=True,
            env=full_env,
            cwd=self.home,
            timeout=180,
        )
        return CliResult(completed.returncode, completed.stdout, completed.stderr)


@pytest.fixture
def cli(isolated_home: Path, tmp_path: Path) -> Cli:
    """The ocat CLI, isolated: its own HOME, XDG folders and store."""
    return Cli(home=isolated_home, store_path=tmp_path / "cli-store")


@dataclass
class FakeLLMServer:
    """A local OpenAI-compatible chat endpoint. Replies with `reply`, or fails with `status`."""

    reply: str = "Hello from the fake model."
    status: int = 200
    # Seconds between streamed pieces (to test cancelling an answer mid-stream).
    delay: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    # The headers of each request (to check which API key a client sent).
    headers: list[dict[str, str]] = field(default_factory=list)
    port: int = 0

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


def _handler_for(server_state: FakeLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            server_state.requests.append(body)
            server_state.headers.append(dict(self.headers.items()))
            if server_state.status != 200:
                payload = json.dumps({"error": {"message": "fake failure", "type": "error", "code": server_state.status}})
                self._send(server_state.status, "application/json", payload.encode())
                return
            usage = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
            if body.get("stream"):
                pieces = [server_state.reply[i : i + 5] for i in range(0, len(server_state.reply), 5)]
                events = []
                for piece in pieces:
                    chunk = {
                        "id": "c1",
                        "object": "chat.completion.chunk",
                        "created": 0,
                        "model": body.get("model"),
                        "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
                    }
                    events.append(f"data: {json.dumps(chunk)}\n\n")
                final = {
                    "id": "c1",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": body.get("model"),
                    "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                    "usage": usage,
                }
                events.append(f"data: {json.dumps(final)}\n\ndata: [DONE]\n\n")
                if server_state.delay:
                    self._trickle(events, server_state.delay)
                else:
                    self._send(200, "text/event-stream", "".join(events).encode())
                return
            if server_state.delay:
                time.sleep(server_state.delay * 10)  # a slow whole answer (to kill a client while it waits)
            payload = {
                "id": "c1",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model"),
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": server_state.reply}, "finish_reason": "stop"}
                ],
                "usage": usage,
            }
            self._send(200, "application/json", json.dumps(payload).encode())

        def _trickle(self, events: list[str], delay: float) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                for event in events:
                    self.wfile.write(event.encode())
                    self.wfile.flush()
                    time.sleep(delay)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client cancelled

        def _send(self, status: int, content_type: str, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


@pytest.fixture
def llm_server() -> Iterator[FakeLLMServer]:
    """A fake OpenAI-compatible server on loopback, for the whole test."""
    state = FakeLLMServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(state))
    state.port = httpd.server_address[1]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield state
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def anyio_backend() -> str:
    """Async tests (the Pilot tests) run on asyncio, Textual's loop."""
    return "asyncio"
