"""The store's server child and its port (ocat.memory.sharing.chroma_server): a port taken by
another process between its choice and the child's bind is never mistaken for the child's."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from ocat.memory.sharing import chroma_server
from ocat.memory.sharing.chroma_server import listens_on, start_server, stop_server


def test_it_tells_whose_socket_listens_on_a_port() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert listens_on(os.getpid(), port) is True
        assert listens_on(os.getppid(), port) is False
    assert listens_on(os.getpid(), port) is None  # nobody listens there now


@pytest.mark.slow
def test_a_port_another_process_took_first_is_given_up_for_another(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()  # another "server", on the port the child is told to use
    ports = iter([taken.getsockname()[1]])
    real = chroma_server._free_port
    monkeypatch.setattr(chroma_server, "_free_port", lambda: next(ports, None) or real())
    server = None
    try:
        server, port = start_server(tmp_path / "store")
        assert port != taken.getsockname()[1]
        assert listens_on(server.pid, port) is True
    finally:
        stop_server(server)
        taken.close()


@pytest.mark.slow
def test_the_server_child_is_out_of_reach_of_the_terminals_ctrl_c(tmp_path: Path) -> None:
    """Ctrl+C reaches the terminal's foreground process group: the store's server child, in the
    chat's group, died of it while the line mode was writing its last exchange through it (the
    exchange went to the kept file instead of the store). It has a group of its own."""
    server = None
    try:
        server, _ = start_server(tmp_path / "store")
        assert os.getpgid(server.pid) != os.getpgid(0)
    finally:
        stop_server(server)


@pytest.mark.slow
def test_the_server_child_runs_chromas_rust_server_without_its_python_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`chroma run` is ChromaDB's Rust server; the child calls it without importing chromadb's
    Python package, which held ~70 MB of the idle chat's memory (docs/PERFORMANCE.md, "Idle
    memory"). A chromadb that cannot be imported is shadowed in front of the real one: the child
    still serves the store, and a client reaches it."""
    import chromadb

    shadow = tmp_path / "shadow" / "chromadb"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('the server child imported chromadb')\n")
    monkeypatch.setenv("PYTHONPATH", str(shadow.parent))
    server = None
    try:
        server, port = start_server(tmp_path / "store")
        client = chromadb.HttpClient(host="127.0.0.1", port=port)
        client.get_or_create_collection("probe").add(ids=["a"], embeddings=[[0.1, 0.2, 0.3]], documents=["x"])
        assert client.get_collection("probe").count() == 1
    finally:
        stop_server(server)
