"""Issue 23, breaks 2 and 3, and the export's own faults: titles are user data, every backup restores.

- `/rename` took ESC, BEL, U+202E, DEL and C1 characters; export wrote them; import then refused
  the whole file. One rule now cleans a title wherever it comes in (ocat.text.terminal.clean_title).
- Titles lived only in the lexical index, a derived file: deleting it lost them. They now live
  in Chroma, on every exchange of the thread; the index keeps a copy it rebuilds.
- Export wrote raw DEL, C1 and bidi characters, and an export imported again exported in
  another order. Now they are escaped, and the round trip is byte-identical.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ocat.memory import MemoryStore
from ocat.memory.storage.export_import import export_memory, import_memory
from ocat.records import DocumentChunk, Exchange
from ocat.operations.threads import rename_thread
from tests.support import empty_store
from tests.support.cli import Cli
from tests.support.fakes import FakeEmbedder
from tests.support.examples import examples

HOSTILE = "\x1b[31mred\x07 title \u202eevil\x7f\x85 end"
CLEANED = "[31mred title evil end"
# Characters a terminal acts on (or that reorder what it shows), which no export may hold raw.
UNPRINTABLE = [chr(c) for c in (*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))] + [
    "\u200e", "\u200f", *map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A))]


def open_store(folder: Path) -> MemoryStore:
    # A new folder starts as a copy of an empty store made once (tests/support/empty_store.py).
    return empty_store.open_store(folder, FakeEmbedder(), name="test")


def thread(store: MemoryStore, thread_id: str, prompts: list[str]) -> None:
    store.add_exchanges(
        Exchange(user_prompt=p, assistant_response=f"about {p}", thread_id=thread_id, session_id="s",
                 exchange_id=f"{thread_id}-{i}", timestamp=1_764_000_000.0 + i)
        for i, p in enumerate(prompts)
    )


def exported(store: MemoryStore, path: Path) -> str:
    with path.open("w", encoding="utf-8") as out:
        export_memory(store, out)
    return path.read_text(encoding="utf-8")


# -- break 2: one rule for titles ---------------------------------------------------------------------


def test_rename_strips_terminal_and_bidi_controls_and_the_backup_restores(tmp_path: Path) -> None:
    store = open_store(tmp_path / "a")
    thread(store, "t1", ["kitchen plan"])
    assert rename_thread(store, "t1", HOSTILE) == CLEANED
    text = exported(store, tmp_path / "backup.jsonl")
    restored = open_store(tmp_path / "b")
    result = import_memory(restored, tmp_path / "backup.jsonl")
    assert result.titles_added == 1 and restored.threads.titles(["t1"]) == {"t1": CLEANED}
    assert json.loads(text.splitlines()[-1]) == {"kind": "thread", "thread_id": "t1", "title": CLEANED}


def test_an_old_export_with_controls_in_a_title_imports_cleaned(tmp_path: Path) -> None:
    store = open_store(tmp_path / "a")
    thread(store, "t1", ["kitchen plan"])
    backup = tmp_path / "old.jsonl"
    exported(store, backup)
    with backup.open("a", encoding="utf-8") as out:  # what an older ocat wrote
        out.write(json.dumps({"kind": "thread", "thread_id": "t1", "title": HOSTILE}, ensure_ascii=False) + "\n")
    restored = open_store(tmp_path / "b")
    import_memory(restored, backup)
    assert restored.threads.titles(["t1"]) == {"t1": CLEANED}


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(title=st.text(alphabet=st.characters(exclude_categories=["Cs"]), min_size=1, max_size=80))
@example(title="a long title " * 6 + "ends")  # drawn titles are rarely long: one that is, every run
def test_any_title_the_store_accepts_survives_export_then_import(tmp_path: Path, title: str) -> None:
    folder = tmp_path / f"p{abs(hash(title))}"
    store = open_store(folder / "a")
    thread(store, "t1", ["one"])
    given_title = rename_thread(store, "t1", title)
    backup = folder / "backup.jsonl"
    exported(store, backup)
    restored = open_store(folder / "b")
    import_memory(restored, backup)  # never refused
    assert restored.threads.titles(["t1"]) == ({"t1": given_title} if given_title else {})


# -- break 3: titles live in the primary store ------------------------------------------------------


def test_titles_survive_deleting_the_lexical_index(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s")
    thread(store, "t1", ["kitchen plan", "tiles"])
    rename_thread(store, "t1", "The kitchen")
    store.add_exchanges([Exchange(user_prompt="later", assistant_response="ok", thread_id="t1", session_id="s2",
                                  exchange_id="t1-later", timestamp=1_764_100_000.0)])
    store.lexical.close()
    store.prompts.close()
    for derived in (tmp_path / "s").glob("ocat-lexical-*"):
        derived.unlink()
    reopened = open_store(tmp_path / "s")
    assert reopened.threads.titles(["t1"]) == {"t1": "The kitchen"}
    lines = [json.loads(line) for line in exported(reopened, tmp_path / "e.jsonl").splitlines()]
    assert {"kind": "thread", "thread_id": "t1", "title": "The kitchen"} in lines


def test_a_store_whose_titles_were_only_in_the_index_is_upgraded(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s")
    thread(store, "t1", ["kitchen plan"])
    thread(store, "t2", ["garden"])
    # As an older ocat left it: the title in the index only, and no marker of the move.
    store.threads.set_title("t1", "The kitchen")
    index = store.lexical.path
    store.lexical.close()
    with sqlite3.connect(index) as db:
        db.execute("DELETE FROM meta")
    reopened = open_store(tmp_path / "s")
    assert reopened.get_thread("t1") and reopened.threads.titles(["t1", "t2"]) == {"t1": "The kitchen"}
    reopened.threads.replace_titles({})  # the copy lost: Chroma still has it
    lines = exported(reopened, tmp_path / "e.jsonl")
    assert '"title": "The kitchen"' in lines


def test_deleting_a_thread_deletes_its_title(tmp_path: Path) -> None:
    from ocat.operations.threads import delete_thread

    store = open_store(tmp_path / "s")
    thread(store, "t1", ["kitchen plan"])
    rename_thread(store, "t1", "The kitchen")
    delete_thread(store, "t1")
    assert "thread" not in exported(store, tmp_path / "e.jsonl")


# -- the export: safe to cat, stable across a round trip -----------------------------------------


def test_an_export_holds_no_raw_terminal_control_and_reads_back_exactly(tmp_path: Path) -> None:
    store = open_store(tmp_path / "a")
    hostile = "bell\x07 del\x7f csi\x9b2J bidi\u202etxt rtl\u2067 end"
    store.add_exchanges([Exchange(user_prompt=hostile, assistant_response=hostile, thread_id="t", session_id="s",
                                  exchange_id="e1", timestamp=1_764_000_000.0)])
    store.add_chunks([DocumentChunk("doc-1", hostile, {"note": hostile})])
    text = exported(store, tmp_path / "e.jsonl")
    assert not any(c in text for c in UNPRINTABLE)
    restored = open_store(tmp_path / "b")
    import_memory(restored, tmp_path / "e.jsonl")
    got = restored.get("e1")
    assert isinstance(got, Exchange) and got.user_prompt == hostile
    chunk = restored.get("doc-1")
    assert isinstance(chunk, DocumentChunk) and chunk.text == hostile and chunk.metadata["note"] == hostile


def test_export_import_export_is_byte_identical(tmp_path: Path) -> None:
    store = open_store(tmp_path / "a")
    # Lengths that differ, so an import embedding by length would reorder them.
    thread(store, "t1", ["a much longer first prompt " * 8, "short", "medium length prompt"])
    thread(store, "t2", ["x" * 300, "y"])
    rename_thread(store, "t2", "Second")
    store.add_chunks([DocumentChunk(f"doc-{i}", "word " * (50 - 10 * i), {"document_id": "d", "chunk_index": i,
                                                                         "total_chunks": 3}) for i in range(3)])
    first = exported(store, tmp_path / "one.jsonl")
    restored = open_store(tmp_path / "b")
    import_memory(restored, tmp_path / "one.jsonl")
    assert exported(restored, tmp_path / "two.jsonl") == first


@pytest.mark.slow
def test_the_cli_round_trip_after_a_hostile_rename(cli: Cli, tmp_path: Path) -> None:
    note = tmp_path / "history.jsonl"
    note.write_text(json.dumps({"kind": "exchange", "exchange_id": "e1", "thread_id": "t1", "session_id": "s",
                                "user_prompt": "kitchen plan", "assistant_response": "ok", "timestamp": 1764000000.0,
                                "prior_exchange_ids": [], "thread_session_id": "t1_s",
                                "thread_continuation_seq": 0}) + "\n"
                    + json.dumps({"kind": "thread", "thread_id": "t1", "title": HOSTILE}, ensure_ascii=False) + "\n")
    imported = cli("--import-memory", str(note))
    assert imported.returncode == 0, imported.stderr
    backup = tmp_path / "backup.jsonl"
    assert cli("--export-memory", str(backup)).returncode == 0
    assert not any(c in backup.read_text(encoding="utf-8") for c in UNPRINTABLE)
    other = tmp_path / "other-store"
    restored = cli("--import-memory", str(backup), env={"OCAT_VECTOR_STORE_PATH": str(other)})
    assert restored.returncode == 0, restored.stderr
    again = tmp_path / "again.jsonl"
    assert cli("--export-memory", str(again), env={"OCAT_VECTOR_STORE_PATH": str(other)}).returncode == 0
    assert again.read_bytes() == backup.read_bytes()
    assert f'"title": "{CLEANED}"' in again.read_text(encoding="utf-8")


@pytest.mark.slow
def test_rename_in_line_mode_cleans_the_title_and_the_backup_restores(cli: Cli, tmp_path: Path) -> None:
    from tests.support.fakes import FakeLLMServer, serving

    with serving(FakeLLMServer(reply="Noted.")) as server:
        chat = cli("--plain", "--model", "openai/fake-model", "--set", f"llm.api_base={server.api_base}",
                   "--set", "llm.api_key=sk-test", input=f"the kitchen plan\n/rename {HOSTILE}\n/threads\n/quit\n")
    assert chat.returncode == 0, chat.stderr
    assert CLEANED in chat.stdout + chat.stderr and "\x1b" not in chat.stdout
    backup = tmp_path / "backup.jsonl"
    assert cli("--export-memory", str(backup)).returncode == 0
    restored = cli("--import-memory", str(backup), env={"OCAT_VECTOR_STORE_PATH": str(tmp_path / "other")})
    assert restored.returncode == 0, restored.stderr
    assert "1 thread title restored" in restored.stdout + restored.stderr
