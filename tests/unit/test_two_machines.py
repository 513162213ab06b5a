"""Two machines, one memory: processes with their own HOMEs on one `chroma run` server share the
derived vectors, and each catches up with what the other changed by reading only that."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ocat.memory import MemoryStore, RetrievalLimits, StoreLocation, retrieve
from ocat.records import Exchange
from tests.support.fakes import FakeEmbedder
from tests.support.warm_start import python_command

pytestmark = pytest.mark.slow


# One machine: a long-lived process on the configured store that reads one JSON command per line
# and answers each with one JSON line, as a chat reads turns. Its embedder notes every text it embeds.
MACHINE = r"""
import json, sys
from ocat.config.loading import load_settings
from ocat.memory import RetrievalLimits, open_store, retrieve, set_thread_title
from ocat.memory.embedding.embedders import embedder_for
from ocat.records import Exchange

settings = load_settings()
real = embedder_for(settings.embedding)
embedded = []

class Noting:
    name, dimensions = real.name, real.dimensions
    def embed(self, texts):
        embedded.extend(texts)
        return real.embed(texts)
    def __getattr__(self, name):
        return getattr(real, name)

store = open_store(settings, embedder=Noting())
limits = RetrievalLimits(exchange_results=5, document_results=0, exchange_threshold=0, document_threshold=0)
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    asked = json.loads(line)
    if "add" in asked:
        exchanges = [Exchange(user_prompt=p, assistant_response=a, thread_id=t, session_id="s") for p, a, t in asked["add"]]
        store.add_exchanges(exchanges)
        said = [e.exchange_id for e in exchanges]
    elif "search" in asked:
        said = [h.id for h in retrieve(store, asked["search"], limits, mode=asked.get("mode", "hybrid"))]
    elif "delete" in asked:
        said = store.delete(asked["delete"])
    elif "rename" in asked:
        said = set_thread_title(store, asked["rename"], asked["title"])
    elif "titles" in asked:
        said = store.threads.titles(asked["titles"])
    elif "embedded" in asked:
        said = {"texts": embedded, "prompts": store.prompts.count(), "passages": store.prompts.passage_count()}
    print(json.dumps(said), flush=True)
"""


class Machine:
    """One machine: the MACHINE process with a HOME of its own, on the server."""

    def __init__(self, home: Path, server: StoreLocation) -> None:
        home.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OCAT_VECTOR_STORE", "XDG_"))}
        env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(home / ".local/share"),
                   XDG_STATE_HOME=str(home / ".local/state"), XDG_CACHE_HOME=str(home / ".cache"),
                   OCAT_VECTOR_STORE_HOST=str(server.host), OCAT_VECTOR_STORE_PORT=str(server.port))
        # From the worker's warm interpreter (tests/support/warm_start.py): a process of its own
        # all the same, with this HOME and environment, which is what makes it another machine.
        self.process = subprocess.Popen(python_command("-c", MACHINE, env=env), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, env=env, cwd=home)
        assert self._answer() == {"ready": True}

    def _answer(self) -> Any:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise AssertionError(f"the machine ended: {self.process.communicate(timeout=30)[1]}")
        return json.loads(line)

    def __call__(self, **command: Any) -> Any:
        """Send one command and return its answer."""
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        return self._answer()

    def close(self) -> None:
        """End the process (end of input), waiting for it."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


LONG_ANSWER = " ".join(f"Step {n}: the inventory ledger reconciles warehouse counts with invoices." for n in range(60))


def test_a_second_machine_reads_the_shared_vectors_and_its_open_session_sees_every_change(
    tmp_path: Path, chroma_server: StoreLocation
) -> None:
    a = Machine(tmp_path / "a", chroma_server)
    b: Machine | None = None
    try:
        prompts = ["how do I reconcile the inventory ledger", "what time is the standup", "which editor do we use"]
        a(add=[[prompts[0], LONG_ANSWER, "t1"], [prompts[1], "At nine, in the small room.", "t1"],
               [prompts[2], "Helix, with the default keymap.", "t2"]])
        b = Machine(tmp_path / "b", chroma_server)
        joined = b(embedded=True)
        # B joined with every prompt vector and passage A made, and embedded none of them.
        assert not set(prompts) & set(joined["texts"]), joined["texts"]
        assert joined["prompts"] == 3 and joined["passages"] > 0
        assert joined["texts"] == []

        # Written by A while B's session is open: found by B's next search, by a rare word and by meaning.
        [fresh] = a(add=[["what did the vet say about Biscuit", "Biscuit has zanzibarite in his bowl; "
                          "the vet said to change his food.", "t3"]])
        assert fresh in b(search="zanzibarite", mode="lexical")
        assert fresh in b(search="advice from the animal doctor about my dog's diet")
        assert not set(b(embedded=True)["texts"]) & {"what did the vet say about Biscuit"}

        # A rename and a delete by A reach B's thread catalogue and index.
        a(rename="t3", title="Biscuit's food")
        b(search="anything")
        assert b(titles=["t3"]) == {"t3": "Biscuit's food"}
        assert a(delete=[fresh]) == 1
        assert fresh not in b(search="zanzibarite", mode="lexical")
        assert b(embedded=True)["prompts"] == 3
    finally:
        a.close()
        if b is not None:
            b.close()


class Reads:
    """Counts the records a store reads by id (texts and metadata) from Chroma while it catches up
    before a search (the search's own reads of its hits are not counted)."""

    def __init__(self, store: MemoryStore) -> None:
        self.ids: list[str] = []
        self.catching_up = False
        fetch, keep_current = store.fetch, store.keep_current

        def counted(kind: Any, ids: Any, **options: Any) -> Any:
            if self.catching_up:
                self.ids += list(ids)
            return fetch(kind, ids, **options)

        def catch_up() -> bool:
            self.catching_up = True
            try:
                return keep_current()
            finally:
                self.catching_up = False

        from ocat.memory.storage.foreground import Foreground

        store.fetch = counted  # type: ignore[method-assign]
        store.foreground = Foreground(before=catch_up)  # what each search runs first


def _exchange(n: int, words: str = "") -> Exchange:
    return Exchange(user_prompt=f"question {n} {words}", assistant_response=f"answer {n}", thread_id=f"t{n % 3}",
                    session_id="s")


def _machine(monkeypatch: pytest.MonkeyPatch, home: Path, server: StoreLocation, embedder: FakeEmbedder) -> MemoryStore:
    """A store opened as a machine with `home` as its cache would open it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    return MemoryStore.open(server, embedder, name="shared")


LIMITS = RetrievalLimits(exchange_results=5, document_results=0, exchange_threshold=0, document_threshold=0)


def test_catching_up_reads_what_changed_not_the_store(
    tmp_path: Path, chroma_server: StoreLocation, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = _machine(monkeypatch, tmp_path / "a", chroma_server, FakeEmbedder())
    a.add_exchanges([_exchange(n) for n in range(40)])
    joining = FakeEmbedder()
    b = _machine(monkeypatch, tmp_path / "b", chroma_server, joining)
    assert b.lexical.count("exchange") == 40 and b.prompts.count() == 40
    assert joining.calls == []  # every prompt vector came from the server

    reads = Reads(b)
    assert retrieve(b, "question", LIMITS) and reads.ids == []  # nothing new: nothing read but the log's count
    fresh = _exchange(99, "quetzal")
    a.add_exchange(fresh)
    embedded = len(joining.calls)
    hits = retrieve(b, "quetzal", LIMITS, mode="lexical")
    assert [h.id for h in hits] == [fresh.exchange_id]
    assert reads.ids == [fresh.exchange_id]  # one record read, not the store's 41
    assert joining.calls[embedded:] == []  # a lexical search: the new prompt's vector was read, not embedded
    assert b.prompts.vectors([fresh.exchange_id]) == a.prompts.vectors([fresh.exchange_id])
    # A pin is user data in the record itself: B reads it from the server, with nothing to catch up.
    from ocat.memory.storage.pins import pinned, set_pinned

    set_pinned(a, fresh.exchange_id, 0)
    assert [p.id for p in pinned(b)] == [fresh.exchange_id]


def test_a_reopened_machine_levels_by_ids_and_applies_what_was_logged_meanwhile(
    tmp_path: Path, chroma_server: StoreLocation, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = _machine(monkeypatch, tmp_path / "a", chroma_server, FakeEmbedder())
    a.add_exchanges([_exchange(n) for n in range(30)])
    b = _machine(monkeypatch, tmp_path / "b", chroma_server, FakeEmbedder())
    b.close()
    # While B is away: A renames a thread (the counts stay as they were) and deletes two threads,
    # and a client that logs nothing (an older ocat) adds three exchanges.
    from ocat.memory import set_thread_title

    set_thread_title(a, "t1", "Named on A")
    a.delete([e.exchange_id for e in a.get_thread("t0") + a.get_thread("t2")])  # 20 of 30: not a damaged store
    a.changes = None
    a.add_exchanges([_exchange(n) for n in range(100, 103)])
    read: list[str] = []
    fetch, records, metadata = MemoryStore.fetch, MemoryStore.iter_records, MemoryStore.iter_metadata

    def fetched(self: MemoryStore, kind: Any, ids: Any, **options: Any) -> Any:
        read.extend(ids)
        return fetch(self, kind, ids, **options)

    def every(each: Any) -> Any:
        def counted(self: MemoryStore, kind: Any, **options: Any) -> Any:
            for record in each(self, kind, **options):
                read.append(kind)
                yield record
        return counted

    monkeypatch.setattr(MemoryStore, "fetch", fetched)
    monkeypatch.setattr(MemoryStore, "iter_records", every(records))
    monkeypatch.setattr(MemoryStore, "iter_metadata", every(metadata))
    again = _machine(monkeypatch, tmp_path / "b", chroma_server, FakeEmbedder())
    assert again.threads.titles(["t1"]) == {"t1": "Named on A"}
    assert len(read) == 3  # the three it lacked, not the store's 13 (and no second read for the titles)
    assert again.lexical.count("exchange") == 13 and again.prompts.count() == 13


def test_vectors_shared_by_another_model_are_never_read(
    tmp_path: Path, chroma_server: StoreLocation, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ocat.memory.storage.chroma import open_client

    open_client(chroma_server).get_or_create_collection(
        "shared-sides", embedding_function=None, metadata={"embedding_model": "other-model", "dimensions": 64})
    embedder = FakeEmbedder()
    store = _machine(monkeypatch, tmp_path / "a", chroma_server, embedder)
    assert store.sides is None
    store.add_exchanges([_exchange(n) for n in range(3)])
    assert store.prompts.count() == 3  # embedded here, as before vectors were shared


def test_a_server_stores_prompt_file_is_not_its_lexical_index(
    tmp_path: Path, chroma_server: StoreLocation, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _machine(monkeypatch, tmp_path / "a", chroma_server, FakeEmbedder())
    store.add_exchanges([_exchange(n) for n in range(3)])
    assert Path(store.prompts.path) != Path(store.lexical.path)
    assert Path(store.prompts.path).parent == Path(store.lexical.path).parent
    # What the index keeps about itself outlives the prompt file being made again (another model's cache).
    store.lexical.set_meta("kept", "yes")
    from ocat.memory.storage.prompt_vectors import PromptVectors

    PromptVectors(store.prompts.path, FakeEmbedder(name="another-model"))
    assert store.lexical.get_meta("kept") == "yes"
