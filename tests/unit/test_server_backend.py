"""The same store API over a real ChromaDB server (`chroma run` on loopback: the `chroma_server` fixture)."""

from __future__ import annotations

import pytest

from ocat.memory import MemoryStore, RetrievalLimits, StoreLocation, retrieve
from ocat.records import Exchange
from tests.support.fakes import FakeEmbedder

pytestmark = pytest.mark.slow


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
