"""Issue 34's invariants, as a stateful property: whatever a user does to a store, in any order
(add, note, delete one chunk, pin, rename, import history with duplicates, export and import,
damage a derived file, reopen as after a crash, check and repair), nothing they kept is lost.

After every step: every record the user did not delete is in the export, with its thread's title
and its pin; no repair removed a record; and a check after a repair says healthy. CI runs a
bounded number of examples; `python bench/store_properties.py` runs many more.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterable

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from ocat.memory import MemoryStore
from ocat.memory.ingest.finishing import finish_document
from ocat.memory.store_check import check_store
from ocat.memory.store_repair import repair_store
from ocat.memory.storage.export_import import export_memory, import_memory
from ocat.operations.add import add_note
from ocat.operations.history import exchanges_of, import_history
from ocat.operations.lookup import delete_records
from ocat.operations.threads import rename_thread
from ocat.operations.wake import pin
from ocat.records import Exchange
from ocat.text.chunking import ChunkingSettings
from tests.support.empty_store import open_store
from tests.support.fakes import FakeEmbedder
from tests.support.history_fixtures import gpt_linear, write_json
from tests.support.examples import examples

CHUNKING = ChunkingSettings("semantic", 200, 0, 200, True)
WORDS = ["bridge", "pier", "scour", "kitchen", "quartz", "budget", "cat", "vet", "boiler", "reset"]
DAMAGES = ("delete", "header", "truncate")
DERIVED = ("ocat-lexical-test.sqlite3", "ocat-prompts-test.sqlite3")


def sentence(seed: int, length: int = 8) -> str:
    return " ".join(WORDS[(seed * 7 + n * 3) % len(WORDS)] + str(seed % 13) for n in range(length))


class StoreKeepsWhatTheUserKept(RuleBasedStateMachine):
    """One store driven through random steps, beside a model of what the user kept."""

    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="ocat-property-"))
        self.store = self._open()
        self.exchanges: set[str] = set()
        self.chunks: set[str] = set()
        self.titles: dict[str, str] = {}
        self.pins: set[str] = set()
        self.threads: set[str] = set()
        self.files: list[Path] = []
        self.added = 0
        # When each id was first kept. A file's chunk ids hash its path, under a folder named at
        # random per run: sorted by id, a draw would pick another chunk when Hypothesis replays
        # the run (FlakyStrategyDefinition); in the order kept, it picks the same one.
        self.first_kept: dict[str, int] = {}

    def _open(self, **options: Any) -> MemoryStore:
        # The first open copies an empty store made once (tests/support/empty_store.py); later ones reopen it.
        return open_store(self.folder / "store", FakeEmbedder(), name="test", **options)

    def _keep_chunks(self, ids: Iterable[str]) -> None:
        for chunk in ids:
            self.first_kept.setdefault(chunk, len(self.first_kept))
            self.chunks.add(chunk)

    def _in_order(self, ids: set[str]) -> list[str]:
        return sorted(ids, key=lambda chunk: self.first_kept.get(chunk, -1))

    def _close(self) -> None:
        self.store.close()
        self.store.lexical.close()
        self.store.prompts.close()

    def teardown(self) -> None:
        self._close()
        shutil.rmtree(self.folder, ignore_errors=True)

    # -- what a user does --------------------------------------------------------------------

    @initialize(seed=st.integers(100, 120))
    def a_store_with_history(self, seed: int) -> None:
        """Every run starts from a store that has lived: a chat, a note, and a file whose add was
        killed half way (the case a repair is for)."""
        self.add_exchanges(3, 0)
        self.vadd(seed, 3)
        self.add_a_file_perhaps_cut_short(seed, 4, 2)

    @rule(count=st.integers(1, 4), thread=st.integers(0, 3))
    def add_exchanges(self, count: int, thread: int) -> None:
        exchanges = [Exchange(user_prompt=sentence(self.added + n), assistant_response=sentence(self.added + n + 1, 30),
                              thread_id=f"chat-{thread}", session_id="s", exchange_id=f"x{self.added + n}",
                              timestamp=1_760_000_000.0 + self.added + n) for n in range(count)]
        self.added += count
        self.store.add_exchanges(exchanges)
        self.exchanges |= {e.exchange_id for e in exchanges}
        self.threads.add(f"chat-{thread}")

    @rule(seed=st.integers(0, 50), paragraphs=st.integers(1, 6))
    def vadd(self, seed: int, paragraphs: int) -> None:
        text = "\n\n".join(sentence(seed + p, 20) for p in range(paragraphs))
        self._keep_chunks(add_note(self.store, text, CHUNKING, source="vadd_command").ids)

    @rule(seed=st.integers(0, 20), paragraphs=st.integers(1, 6), cut=st.integers(0, 5))
    def add_a_file_perhaps_cut_short(self, seed: int, paragraphs: int, cut: int) -> None:
        """A file added (`--add-to-vector-store`), or an add of it killed after `cut` chunks."""
        from ocat.memory import add_path
        from ocat.memory.ingest.paths import file_chunks

        file = self.folder / "files" / f"notes-{seed}.txt"
        file.parent.mkdir(exist_ok=True)
        if file in self.files:
            return  # adding a file again (edited, or after it was deleted) replaces it: the user's delete
        file.write_text("\n\n".join(sentence(seed + p, 20) for p in range(paragraphs)))
        chunks = file_chunks(file, file.read_text(), CHUNKING, source="cli")
        if cut and cut < len(chunks):
            self.store.add_chunks(chunks[:cut])
            self._keep_chunks(c.id for c in chunks[:cut])
        else:
            self._keep_chunks(add_path(self.store, file, CHUNKING).files[0].ids)
        self.files.append(file)

    @precondition(lambda self: self.files)
    @rule(data=st.data(), edit=st.booleans())
    def remove_or_edit_a_file_on_disk(self, data: st.DataObject, edit: bool) -> None:
        """The file a document came from is deleted or changed: its memory stays."""
        file = data.draw(st.sampled_from(self.files))
        if edit:
            file.write_text("another text altogether")
        else:
            file.unlink(missing_ok=True)

    @precondition(lambda self: self.chunks)
    @rule(data=st.data())
    def delete_one_chunk(self, data: st.DataObject) -> None:
        chosen = data.draw(st.sampled_from(self._in_order(self.chunks)))
        assert delete_records(self.store, [chosen]) == 1
        self.chunks.discard(chosen)
        self.pins.discard(chosen)

    @precondition(lambda self: self.exchanges or self.chunks)
    @rule(data=st.data())
    def pin_one(self, data: st.DataObject) -> None:
        chosen = data.draw(st.sampled_from(sorted(self.exchanges) + self._in_order(self.chunks)))
        pin(self.store, chosen)
        self.pins.add(chosen)

    @precondition(lambda self: self.threads)
    @rule(data=st.data(), title=st.sampled_from(["Kitchen", "Bridge survey", "The cat"]))
    def rename(self, data: st.DataObject, title: str) -> None:
        thread = data.draw(st.sampled_from(sorted(self.threads)))
        rename_thread(self.store, thread, title)
        self.titles[thread] = title

    @rule(first=st.integers(0, 5), count=st.integers(1, 4), twice=st.booleans())
    def import_history_with_duplicates(self, first: int, count: int, twice: bool) -> None:
        conversations = [gpt_linear(f"c{k}", f"Imported {k}", [("user", sentence(k)), ("assistant", sentence(k + 1)),
                                                               ("user", sentence(k + 2)), ("assistant", sentence(k))])
                         for k in range(first, first + count)]
        listed = conversations + (conversations[:1] if twice else [])
        export = write_json(self.folder / "conversations.json", listed)
        import_history(self.store, export, "chatgpt")
        from ocat.history_import import read_history

        for item in read_history(export, "chatgpt"):
            for exchange in exchanges_of(item):  # type: ignore[arg-type]
                self.exchanges.add(exchange.exchange_id)
                self.threads.add(exchange.thread_id)
                self.titles.setdefault(exchange.thread_id, item.title)  # type: ignore[union-attr]

    @rule()
    def export_and_import_again(self) -> None:
        out = self.folder / "memory.jsonl"
        with out.open("w", encoding="utf-8") as handle:
            export_memory(self.store, handle)
        import_memory(self.store, out)

    @rule(which=st.sampled_from(DERIVED), how=st.sampled_from(DAMAGES))
    def damage_a_derived_file_and_reopen(self, which: str, how: str) -> None:
        self.store.wait_for_passages()
        self._close()
        path = self.folder / "store" / which
        if path.exists():
            if how == "delete":
                path.unlink()
                for side in ("-wal", "-shm"):
                    Path(f"{path}{side}").unlink(missing_ok=True)
            elif how == "header":
                with path.open("r+b") as handle:
                    handle.write(b"this is not sqlite")
            else:
                os.truncate(path, path.stat().st_size // 2)
        self.store = self._open(notify=lambda _: None)

    @rule()
    def reopen_as_after_a_crash(self) -> None:
        self.store = self._open()  # the old handles are left open, as a killed process leaves them

    @rule()
    def check_and_repair(self) -> None:
        self.store.wait_for_passages()
        self._close()
        done = repair_store(self._open(upkeep=False), lambda store, partial: finish_document(store, partial, CHUNKING))
        assert done.after.healthy, done.after.lines()
        assert check_store(self._open(upkeep=False)).healthy
        self.store = self._open()

    # -- what must hold ----------------------------------------------------------------------

    @invariant()
    def nothing_kept_is_lost(self) -> None:
        out = io.StringIO()
        export_memory(self.store, out)
        lines = [json.loads(line) for line in out.getvalue().splitlines()]
        exported = {line["exchange_id"] for line in lines if line["kind"] == "exchange"}
        documents = {line["id"] for line in lines if line["kind"] == "document"}
        titles = {line["thread_id"]: line["title"] for line in lines if line["kind"] == "thread"}
        pins = {line["id"] for line in lines if line["kind"] == "pin"}
        assert self.exchanges <= exported, sorted(self.exchanges - exported)
        assert self.chunks <= documents, sorted(self.chunks - documents)
        assert {t: titles.get(t) for t in self.titles} == self.titles
        assert self.pins <= pins, sorted(self.pins - pins)


# CI runs the same 40 runs each time (derandomized: a failure is never a matter of luck), the
# quick loop 5 of them (tests/support/examples.py);
# bench/store_properties.py runs hundreds of random ones.
StoreKeepsWhatTheUserKept.TestCase.settings = settings(
    max_examples=int(os.environ.get("STORE_PROPERTY_EXAMPLES", examples(40))),
    derandomize=not os.environ.get("STORE_PROPERTY_RANDOM"),
    stateful_step_count=int(os.environ.get("STORE_PROPERTY_STEPS", "12")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestStoreKeepsWhatTheUserKept = StoreKeepsWhatTheUserKept.TestCase
