"""The same store API over a real ChromaDB server (`chroma run` on loopback)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from ocat.memory import MemoryStore, RetrievalLimits, StoreLocation, retrieve
from ocat.records import Exchange
from tests.support.fakes import FakeEmbedder

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def chroma_server(tmp_path: Path) -> Iterator[StoreLocation]:
    chroma = shutil.which("chroma", path=str(Path(sys.executable).parent)) or shutil.which("chroma")
    assert chroma, "the chroma command ships with chromadb and should be installed"
    port = free_port()
    process = subprocess.Popen(
        [chroma, "run", "--path", str(tmp_path / "server-data"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        else:
            pytest.fail("chroma run did not start listening within 60 s")
        yield StoreLocation(host="127.0.0.1", port=port)
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_the_store_works_the_same_over_a_chroma_server(chroma_server: StoreLocation) -> None:
    store = MemoryStore.open(chroma_server, FakeEmbedder(), name="served")
    exchange = Exchange(user_prompt="where is the server", assistant_response="on loopback", thread_id="t", session_id="s")
    assert store.add_exchange(exchange) is True
    assert store.add_exchange(exchange) is False
    limits = RetrievalLimits(exchange_results=3, document_results=0, exchange_threshold=0, document_threshold=0)
    hits = retrieve(store, "server loopback", limits)
    assert hits[0].id == exchange.exchange_id
    assert store.location.describe() == f"http://127.0.0.1:{chroma_server.port}"
    # A second client (another process would do the same) sees the same records.
    again = MemoryStore.open(chroma_server, FakeEmbedder(), name="served")
    assert again.get_thread("t") == [exchange]
    with pytest.raises(Exception, match="fake-embedder"):
        MemoryStore.open(chroma_server, FakeEmbedder(name="other-model"), name="served")
