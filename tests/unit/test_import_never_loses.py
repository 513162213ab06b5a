"""Issue 34: a history import never loses a title, never locks itself out, reads only what it can
bound (breaks B, E, J, K, L, and the import's messages).

B. Titles are written with their exchanges; a rerun names an imported thread that lacks its title.
E. A conversation listed twice, overlapping shards, or conversations without ids import; one with
   a repeated message id is named and skipped, and the others import.
J. Pipes and devices are refused at once; `-` reads stdin through a temporary file.
K. A very large message is stored whole, searched and embedded in bounded windows.
L. A conversation nested thousands of levels deep is named and skipped, on every rerun.
"""

from __future__ import annotations

import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ocat.errors import Cancelled
from ocat.history_import.json_stream import TooDeep, iter_array
from ocat.memory import MemoryStore, StoreLocation
from ocat.memory.embedding.embedders import leading_words
from ocat.memory.storage.export_import import export_memory
from ocat.operations import history
from ocat.operations.history import import_history
from ocat.records import SEARCHED_CHARS, THREAD_TITLE_KEY
from tests.support.cli import Cli, Running
from tests.support.fakes import FakeEmbedder
from tests.support.history_fixtures import (
    add_llm_thread,
    create_llm_db,
    gpt_linear,
    gpt_message,
    gpt_conversation,
    write_json,
)


def open_store(folder: Path) -> MemoryStore:
    return MemoryStore.open(StoreLocation(path=folder), FakeEmbedder(), name="test")


def many(count: int, turns: int = 2) -> list[dict[str, Any]]:
    return [gpt_linear(f"c{i:04d}", f"Conversation {i}",
                       [(role, f"{role} says {n} in conversation {i}") for n in range(turns)
                        for role in ("user", "assistant")])
            for i in range(count)]


def titles_in_store(store: MemoryStore) -> dict[str, set[str]]:
    """Each thread's titles as its exchanges carry them in Chroma ("" for an exchange without)."""
    found: dict[str, set[str]] = {}
    for _, metadata in store.iter_metadata("exchange"):
        found.setdefault(str(metadata["thread_id"]), set()).add(str(metadata.get(THREAD_TITLE_KEY) or ""))
    return found


# -- B: titles -----------------------------------------------------------------------------------


def test_b_a_stop_mid_write_leaves_no_exchange_without_its_title_and_the_rerun_completes(tmp_path: Path) -> None:
    export = write_json(tmp_path / "conversations.json", many(300))
    store = open_store(tmp_path / "store")
    calls = [0]

    def stop_soon(label: str, done: int, total: int) -> None:
        calls[0] += 1
        if calls[0] == 5:  # inside a write, between two embedded steps
            raise Cancelled("stopped")

    first = import_history(store, export, progress=stop_soon)
    assert first.stopped and 0 < store.count("exchange") < 600
    # Every exchange written carries its thread's title: no thread is left unnamed by the stop.
    assert all("" not in titles for titles in titles_in_store(store).values())
    second = import_history(store, export)
    assert not second.stopped and store.count("exchange") == 600
    found = titles_in_store(store)
    assert len(found) == 300 and all(len(t) == 1 and "" not in t for t in found.values())
    assert len(store.threads.all_titles()) == 300


def test_b_a_rerun_names_threads_an_older_import_left_untitled(tmp_path: Path) -> None:
    export = write_json(tmp_path / "conversations.json", many(20))
    store = open_store(tmp_path / "store")
    import_history(store, export)
    # As an interrupted import by the release before left them: exchanges here, titles not.
    ids = list(store.iter_ids("exchange"))
    store.exchanges.update(ids=ids, metadatas=[{THREAD_TITLE_KEY: None}] * len(ids))
    store.threads.replace_titles({})
    again = import_history(store, export)
    assert again.already_here == 20 and again.new == 0
    assert all(len(t) == 1 and "" not in t for t in titles_in_store(store).values())


def test_b_a_rerun_keeps_a_title_the_user_gave(tmp_path: Path) -> None:
    from ocat.operations.threads import rename_thread

    export = write_json(tmp_path / "conversations.json", many(2))
    store = open_store(tmp_path / "store")
    import_history(store, export)
    thread = next(iter(titles_in_store(store)))
    rename_thread(store, thread, "Mine now")
    grown = many(2, turns=3)
    import_history(store, write_json(tmp_path / "newer.json", grown))
    assert titles_in_store(store)[thread] == {"Mine now"}


# -- E: duplicates -------------------------------------------------------------------------------


def test_e_a_conversation_listed_twice_imports_once_and_reruns_cleanly(tmp_path: Path) -> None:
    conversations = many(3)
    export = write_json(tmp_path / "conversations.json", [*conversations, conversations[1]])
    store = open_store(tmp_path / "store")
    first = import_history(store, export)
    assert (first.conversations, first.new, first.already_here, first.exchanges) == (4, 3, 1, 6)
    again = import_history(store, export)
    assert (again.already_here, again.new, again.problems) == (4, 0, [])
    assert store.count("exchange") == 6


def test_e_overlapping_shards_with_a_longer_version_take_its_new_exchanges(tmp_path: Path) -> None:
    folder = tmp_path / "export"
    folder.mkdir()
    write_json(folder / "conversations-000.json", many(3))
    write_json(folder / "conversations-001.json", [many(3, turns=3)[2], *many(5)[3:]])
    store = open_store(tmp_path / "store")
    done = import_history(store, folder)
    assert done.problems == [] and done.conversations == 6
    assert store.count("exchange") == 3 * 2 + 1 + 2 * 2


def test_e_a_repeated_message_id_skips_that_conversation_and_conversations_without_ids_are_apart(
    tmp_path: Path,
) -> None:
    repeated = gpt_conversation("twice", "Repeated ids", [
        ("root", None, None),
        ("m1", "root", gpt_message("same", "user", "first question")),
        ("m2", "m1", gpt_message("a1", "assistant", "first answer")),
        ("m3", "m2", gpt_message("same", "user", "second question")),
        ("m4", "m3", gpt_message("a2", "assistant", "second answer")),
    ])
    anonymous = []
    for n in range(2):
        conversation = gpt_linear(f"anon{n}", f"No id {n}", [("user", f"hello {n}"), ("assistant", f"hi {n}")])
        conversation.pop("id")
        conversation.pop("conversation_id")
        anonymous.append(conversation)
    export = write_json(tmp_path / "conversations.json", [repeated, *anonymous, *many(1)])
    store = open_store(tmp_path / "store")
    done = import_history(store, export)
    assert [p.title for p in done.problems] == ["Repeated ids"] and "appears twice" in done.problems[0].problem
    assert done.new == 3 and len(titles_in_store(store)) == 3
    assert import_history(store, export).already_here == 3


@pytest.mark.slow
def test_e_the_cli_imports_an_export_that_lists_a_conversation_twice(cli: Cli, tmp_path: Path) -> None:
    conversations = many(2)
    export = write_json(tmp_path / "conversations.json", [*conversations, *conversations])
    for _ in range(2):
        run = cli("--import-history", str(export), "--output", "json")
        assert run.returncode == 0, run.stderr
        assert "Expected IDs to be unique" not in run.stderr


# -- J: pipes, devices, stdin --------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("where", ["/dev/zero", "fifo", "/dev/stdin"])
def test_j_pipes_and_devices_are_refused_at_once(cli: Cli, tmp_path: Path, where: str) -> None:
    path = where
    if where == "fifo":
        path = str(tmp_path / "export.fifo")
        os.mkfifo(path)
    completed = subprocess.run(
        [sys.executable, "-m", "ocat", "--import-history", path, "--from", "chatgpt"],
        input="[]", capture_output=True, text=True, env=cli.environ(), cwd=cli.home, timeout=60,
    )
    assert completed.returncode == 1, completed.stderr
    assert "not a regular file" in completed.stderr and "`-`" in completed.stderr


@pytest.mark.slow
def test_j_dash_reads_stdin_through_a_temporary_file(cli: Cli, tmp_path: Path) -> None:
    export = json.dumps(many(2))
    run = cli("--import-history", "-", "--output", "json", input=export)
    assert run.returncode == 0, run.stderr
    assert run.json()["result"]["new"] == 2
    assert cli("--import-history", "-", "--output", "json", input=export).json()["result"]["already_here"] == 2


@pytest.mark.slow
def test_j_a_stop_inside_one_long_conversation_stops_it_and_the_rerun_completes(cli: Cli, tmp_path: Path) -> None:
    # 160 exchanges: the stop comes at the first progress line (16 exchanges embedded), some 9
    # steps before the end, and the rerun still has most of the conversation to write.
    long_one = gpt_linear("long", "Long", [(role, f"{role} line {n} about the pump")
                                           for n in range(160) for role in ("user", "assistant")])
    export = write_json(tmp_path / "conversations.json", [long_one])
    running = Running(cli, "--import-history", str(export))
    running.wait_for("conversations")  # the first progress line: it is writing the long conversation
    running.process.send_signal(signal.SIGINT)
    code = running.process.wait(timeout=120)
    assert code == 130
    out = running.wait_until(lambda text: "again" in text, stream="stdout")
    assert "run the same command again" in out
    rerun = cli("--import-history", str(export), "--output", "json")
    assert rerun.returncode == 0 and rerun.json()["result"]["grown"] == 1


def test_j_a_stop_after_the_last_write_does_not_say_there_is_more(tmp_path: Path) -> None:
    export = write_json(tmp_path / "conversations.json", many(2))
    store = open_store(tmp_path / "store")

    def stop_at_the_end(label: str, done: int, total: int) -> None:
        if done == 2:
            raise Cancelled("stopped")

    done = import_history(store, export, progress=stop_at_the_end)
    assert not done.stopped and "again" not in done.sentence() and store.count("exchange") == 4


def test_j_progress_never_shows_more_done_than_its_total(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    export = write_json(tmp_path / "conversations.json", many(11))
    # Patched where it is read (ocat.operations.history imports it by name).
    monkeypatch.setattr("ocat.operations.history.count_conversations", lambda path, fmt=None: 6)
    seen: list[tuple[int, int]] = []
    import_history(open_store(tmp_path / "store"), export,
                   progress=lambda label, done, total: seen.append((done, total)))
    assert all(total == 0 or done <= total for done, total in seen), seen


# -- K: a very large message ---------------------------------------------------------------------


def test_k_a_huge_message_is_stored_whole_but_searched_and_embedded_in_bounded_windows(tmp_path: Path) -> None:
    answer = "pump " * 100_000 + "x" * 300_000 + " the valve is blue"
    export = write_json(tmp_path / "conversations.json",
                        [gpt_linear("big", "Big", [("user", "read this log"), ("assistant", answer)])])
    store = open_store(tmp_path / "store")
    assert import_history(store, export).new == 1
    [record_id] = list(store.iter_ids("exchange"))
    got = store.fetch("exchange", [record_id], vectors=False)
    assert len(got["documents"][0]) == SEARCHED_CHARS  # what is searched and quoted
    out = io.StringIO()
    export_memory(store, out)
    assert json.loads(out.getvalue().splitlines()[0])["assistant_response"] == answer  # what is kept
    # A text without a single space is cut too before the tokenizer sees it.
    assert len(leading_words("y" * 5_000_000, 512)) <= 512 * 100


def test_k_a_message_over_the_limit_skips_its_conversation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(history, "MAX_MESSAGE_CHARS", 1000)
    export = write_json(tmp_path / "conversations.json",
                        [gpt_linear("big", "Too big", [("user", "q"), ("assistant", "z" * 1001)]), *many(1)])
    done = import_history(open_store(tmp_path / "store"), export)
    assert [p.title for p in done.problems] == ["Too big"] and "over the limit" in done.problems[0].problem
    assert done.new == 1


# -- L: deep nesting -----------------------------------------------------------------------------


def deep(levels: int) -> str:
    return "[" * levels + '"a \\" ] { string"' + "]" * levels


@pytest.mark.parametrize("chunk_size", [7, 64, 1 << 20])
def test_l_an_item_nested_too_deeply_is_read_past_and_the_next_comes_through(chunk_size: int) -> None:
    text = '[{"a": 1}, ' + deep(5000) + ', {"b": "\\\\"}, ' + deep(3000) + "]"
    items = list(iter_array(io.BytesIO(text.encode()), "test.json", "conversation", chunk_size=chunk_size))
    assert items[0] == {"a": 1} and items[2] == {"b": "\\"}
    assert isinstance(items[1], TooDeep) and items[1].number == 2 and isinstance(items[3], TooDeep)


def test_l_a_conversation_nested_5000_deep_is_named_and_the_others_import(tmp_path: Path) -> None:
    good = many(2)
    bad = gpt_linear("deep", "Deep", [("user", "q"), ("assistant", "a")])
    text = json.dumps([good[0], bad, good[1]])
    text = text.replace('"moderation_results": []', '"moderation_results": ' + "[" * 5000 + "]" * 5000, 1)
    export = tmp_path / "conversations.json"
    export.write_text(text)  # the first conversation now holds an array 5000 levels deep
    store = open_store(tmp_path / "store")
    for _ in range(2):
        done = import_history(store, export)
        assert len(done.problems) == 1 and "nested too deeply" in done.problems[0].problem
    assert len(titles_in_store(store)) == 2


# -- messages ------------------------------------------------------------------------------------


def test_an_llm_database_whose_fragments_are_gone_skips_those_conversations(tmp_path: Path) -> None:
    db_path = tmp_path / "logs.db"
    create_llm_db(db_path)
    with sqlite3.connect(db_path) as db:
        add_llm_thread(db, "t1", "Fine", [("user", "hello"), ("assistant", "hi there")])
        add_llm_thread(db, "t2", "Fragments", [("user", "see the file"), ("assistant", "noted")])
        db.execute("update parts set text = null, payload = ? where message_hash = 'b2:t2-u0'",
                   (json.dumps({"text_ref": [{"fragment": 1}]}),))
        db.execute("drop table if exists fragments")
    store = open_store(tmp_path / "store")
    done = import_history(store, db_path)
    assert done.new == 1 and len(done.problems) == 1 and "fragments" in done.problems[0].problem


@pytest.mark.slow
def test_pin_of_an_empty_or_huge_id_says_what_is_wrong(cli: Cli) -> None:
    empty = cli("--pin", "")
    assert empty.returncode != 0 and "give the id" in empty.stderr and "more than one" not in empty.stderr
    huge = cli("--pin", "a" * 100_000)
    assert huge.returncode != 0 and "no memory with id" in huge.stderr and "LIKE" not in huge.stderr


@pytest.mark.slow
def test_a_pin_line_before_1970_is_refused_not_silently_dropped(cli: Cli, tmp_path: Path) -> None:
    lines = [json.dumps({"kind": "exchange", "exchange_id": "e1", "thread_id": "t", "session_id": "s",
                         "user_prompt": "q", "assistant_response": "a", "timestamp": 1_764_000_000.0,
                         "prior_exchange_ids": [], "thread_session_id": "t_s", "thread_continuation_seq": 0}),
             json.dumps({"kind": "pin", "id": "e1", "pinned_at": -5})]
    path = tmp_path / "pins.jsonl"
    path.write_text("\n".join(lines) + "\n")
    run = cli("--import-memory", str(path))
    assert run.returncode == 1 and "pins.jsonl:2:" in run.stderr and "pinned_at" in run.stderr
