"""A served store whose server stops answering or dies, and a store held without being shared.

Real Chroma server children on loopback; a stopped process is made with SIGSTOP (what
Ctrl+Z does to a whole process group), a dead one with kill.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

import ocat.memory.sharing.owner_lock as owner
from ocat.errors import StoreError
from ocat.memory.storage.chroma import ServerNotAnswering, open_client, server_answers
from ocat.memory.storage.location import StoreLocation
from ocat.memory.sharing.owner_lock import OWNER_FILE, SERVER_FILE, StoreLease, acquire

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGSTOP is POSIX")

COLLECTION = "recovery-test"
IDS = ["first", "second"]

# Another process opening the store: prints what it heard while waiting, then its role or error.
OPEN = r"""
import json, sys
from pathlib import Path
import ocat.memory.sharing.owner_lock as owner
from ocat.errors import StoreError
owner.NOTIFY_EVERY_SECONDS = float(sys.argv[3])
notes = []
try:
    lease = owner.acquire(Path(sys.argv[1]), serve=False, wait_seconds=float(sys.argv[2]), notify=notes.append)
except StoreError as exc:
    print(json.dumps({"error": str(exc), "notes": notes}))
else:
    print(json.dumps({"role": lease.role, "port": lease.location.port if lease.location.host else None, "notes": notes}))
    lease.release()
"""

# A one-shot owner: holds the store without sharing it until its stdin closes.
HOLD = r"""
import sys
from pathlib import Path
from ocat.memory.sharing.owner_lock import acquire
lease = acquire(Path(sys.argv[1]), serve=False)
print("held", flush=True)
sys.stdin.read()
lease.release()
"""


def open_elsewhere(path: Path, wait_seconds: float, notify_every: float = 30.0) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", OPEN, str(path), str(wait_seconds), str(notify_every)],
        capture_output=True, text=True, timeout=wait_seconds + 120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def write_records(location: StoreLocation) -> None:
    collection = open_client(location).get_or_create_collection(COLLECTION, embedding_function=None)
    collection.add(ids=IDS, embeddings=[[0.1, 0.2, 0.3], [0.3, 0.2, 0.1]], documents=["one", "two"])


def read_ids(location: StoreLocation) -> list[str]:
    import chromadb

    client = chromadb.HttpClient(host=location.host, port=location.port)
    return sorted(client.get_collection(COLLECTION).get(ids=IDS, include=[])["ids"])


def server_port_on_disk(path: Path) -> int:
    return int(json.loads((path / SERVER_FILE).read_text())["port"])


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[StoreLease]:
    """A serving owner in this process, with two records; woken and released at the end."""
    lease = acquire(tmp_path / "store", serve=True)
    write_records(lease.location)
    try:
        yield lease
    finally:
        if lease.server_process is not None and lease.server_process.poll() is None:
            os.kill(lease.server_process.pid, signal.SIGCONT)
        lease.release()


def test_a_server_that_accepts_connections_but_never_answers_times_out(tmp_path: Path) -> None:
    # The kernel completes connections to a listening socket nobody reads: a stopped server.
    with socket.socket() as hole:
        hole.bind(("127.0.0.1", 0))
        hole.listen(8)
        port = hole.getsockname()[1]
        # Short limits: the test waits them out (connecting on loopback completes at once).
        assert server_answers("127.0.0.1", port, timeout=0.2) is False
        started = time.monotonic()
        with pytest.raises(ServerNotAnswering, match=rf"the memory server at http://127.0.0.1:{port} did not answer within 0.5 s"):
            open_client(StoreLocation(host="127.0.0.1", port=port), timeout=0.5)
        assert time.monotonic() - started < 60


@pytest.mark.slow
def test_a_stopped_server_times_out_and_new_processes_wait_for_it_instead_of_adopting_it(serving: StoreLease) -> None:
    assert serving.server_process is not None and serving.location.host is not None
    path, port = serving.location.path, serving.location.port
    assert path is not None
    collection = open_client(serving.location, timeout=0.5).get_collection(COLLECTION)
    os.kill(serving.server_process.pid, signal.SIGSTOP)
    started = time.monotonic()
    with pytest.raises(StoreError, match=rf"http://127.0.0.1:{port} did not answer within 0.5 s"):
        collection.count()
    assert time.monotonic() - started < 60
    assert serving.server_alive(timeout=0.5) is False
    # Another process does not take the stopped server's address: it waits, says why, and gives up.
    waited = open_elsewhere(path, wait_seconds=2)
    assert "busy" in waited["error"] and f"process {os.getpid()}" in waited["error"]
    assert f"its memory server at http://127.0.0.1:{port} is stopped" in waited["notes"][0]
    assert "`fg` in its terminal resumes it" in waited["notes"][0]
    # Resumed, the server is used again.
    os.kill(serving.server_process.pid, signal.SIGCONT)
    assert open_elsewhere(path, wait_seconds=60)["role"] == "client"
    assert collection.count() == 2


@pytest.mark.slow
def test_a_killed_server_is_detected_and_a_restarted_one_serves_the_same_records(tmp_path: Path) -> None:
    lease = acquire(tmp_path / "store", serve=True, keep_serving=False)
    try:
        write_records(lease.location)
        assert lease.server_alive() is True
        assert lease.server_process is not None
        lease.server_process.kill()
        lease.server_process.wait()
        assert lease.server_alive() is False
        location = lease.restart_server()
        assert location == lease.location and lease.server_alive() is True
        assert server_port_on_disk(tmp_path / "store") == location.port
        assert read_ids(location) == sorted(IDS)
    finally:
        lease.release()
    # Nothing is left behind: no address, no owner record, no server child.
    assert not (tmp_path / "store" / SERVER_FILE).exists()
    assert not (tmp_path / "store" / OWNER_FILE).exists()


@pytest.mark.slow
def test_a_process_waiting_for_the_store_becomes_a_client_of_the_restarted_server(serving: StoreLease) -> None:
    path = serving.location.path
    assert serving.server_process is not None and path is not None
    killed = serving.server_process
    killed.kill()
    # The owner starts a new server by itself; a process arriving meanwhile waits for it.
    opened = open_elsewhere(path, wait_seconds=600)
    assert opened["role"] == "client"
    assert killed.poll() is not None and serving.server_process is not killed
    assert opened["port"] == serving.location.port == server_port_on_disk(path)
    assert read_ids(serving.location) == sorted(IDS)


@pytest.mark.slow
def test_recover_restarts_a_stopped_server_and_points_clients_at_the_new_one(serving: StoreLease) -> None:
    path = serving.location.path
    assert serving.server_process is not None and path is not None
    client = acquire(path, serve=False)  # a second lock in this process is refused like another process's
    assert client.role == "client" and client.location == serving.location
    stopped = serving.server_process
    os.kill(stopped.pid, signal.SIGSTOP)
    location = serving.recover(timeout=1)
    assert stopped.poll() is not None, "the stopped server is killed before another starts on the folder"
    assert read_ids(location) == sorted(IDS)
    assert client.recover() == location
    # Once the owner has finished, a client is told to open the store again.
    serving.release()
    with pytest.raises(StoreError, match="open it again"):
        client.recover()


@pytest.mark.slow
def test_a_server_that_keeps_exiting_makes_its_owner_give_the_store_up(
    serving: StoreLease, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(owner, "MAX_RESTARTS", 0)
    path = serving.location.path
    assert serving.server_process is not None and path is not None
    serving.server_process.kill()
    deadline = time.monotonic() + 60
    while serving.problem is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert serving.problem is not None and "exited" in serving.problem
    assert serving.server_alive() is False
    with pytest.raises(StoreError, match="gave up the store"):
        serving.recover()
    # The lock is free, so the next process owns the store at once instead of waiting.
    taken = acquire(path, serve=False, wait_seconds=0)
    assert taken.role == "owner"
    taken.release()


@pytest.mark.slow
def test_waiting_for_a_store_held_without_sharing_says_which_process_and_how_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "store"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path), "--add-to-vector-store", "notes.md", "--set", "llm.api_key=sk-test-SECRET"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        record = (path / OWNER_FILE).read_text()
        assert "SECRET" not in record and "notes.md" not in record  # option names only: values can be secrets
        monkeypatch.setattr(owner, "NOTIFY_EVERY_SECONDS", 0.5)
        notes: list[str] = []
        with pytest.raises(StoreError, match=rf"busy: process {holder.pid} .* does not share it"):
            acquire(path, serve=False, wait_seconds=2, notify=notes.append)
        assert notes[0].startswith(f"waiting for the store at {path}: process {holder.pid} (python --add-to-vector-store --set)")
        assert "does not share it (a one-shot command" in notes[0]
        assert "waits up to 2 s (Ctrl+C or quit to give up)" in notes[0]
        assert any(note.startswith(f"still waiting for the store at {path} after ") for note in notes[1:])
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=60)
    assert not (path / OWNER_FILE).exists()
    lease = acquire(path, serve=False, wait_seconds=0)
    assert json.loads((path / OWNER_FILE).read_text())["pid"] == os.getpid()
    lease.release()
    assert not (path / OWNER_FILE).exists()


@pytest.mark.slow
def test_an_owner_record_left_by_a_crash_does_not_name_a_process_that_is_gone(tmp_path: Path) -> None:
    path = tmp_path / "store"
    path.mkdir()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (path / OWNER_FILE).write_text(json.dumps({"pid": gone.pid, "command": "ocat --ask", "serves": False}))
    # The lock taken by a process that has not written its own record yet (or an older ocat).
    take_lock = (
        "import sys; from filelock import FileLock; lock = FileLock(sys.argv[1]); lock.acquire(); "
        "print('held', flush=True); sys.stdin.read()"
    )
    locker = subprocess.Popen(
        [sys.executable, "-c", take_lock, str(path / owner.LOCK_FILE)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert locker.stdout is not None and locker.stdout.readline() == "held\n"
        notes: list[str] = []
        with pytest.raises(StoreError, match="busy: another ocat process holds it"):
            acquire(path, serve=False, wait_seconds=0.5, notify=notes.append)
        assert str(gone.pid) not in notes[0] and "ocat --ask" not in notes[0]
    finally:
        assert locker.stdin is not None
        locker.stdin.close()
        locker.wait(timeout=60)
    lease = acquire(path, serve=False, wait_seconds=0)
    assert json.loads((path / OWNER_FILE).read_text())["pid"] == os.getpid()
    lease.release()
