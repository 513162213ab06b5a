"""Thread titles (/rename) travel with `--export-memory` and come back with `--import-memory`;
the counts those print are in words ("1 thread title", never "(s)")."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from ocat.commands import run_command
from ocat.config.loading import load_settings
from ocat.errors import InputFileError
from ocat.memory import MemoryStore, StoreLocation
from ocat.memory.storage.export_import import export_memory, import_memory
from ocat.operations.lookup import recent_threads
from ocat.operations.threads import rename_thread
from ocat.chat.session import ChatSession
from tests.support.cli import Cli
from tests.support.fakes import FakeEmbedder


def exchange_line(i: int, thread: str = "t") -> dict[str, Any]:
    return {
        "kind": "exchange", "exchange_id": f"ex-{i}", "thread_id": thread, "session_id": "s",
        "user_prompt": f"question {i}", "assistant_response": f"answer {i}", "timestamp": 1_700_000_000.0 + i,
        "prior_exchange_ids": [], "thread_session_id": f"{thread}_s", "thread_continuation_seq": 0,
    }


def write_lines(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def fresh_store(tmp_path: Path, name: str = "copy") -> MemoryStore:
    return MemoryStore.open(StoreLocation(path=tmp_path / name), FakeEmbedder(), name=name)


def titles_of(store: MemoryStore) -> dict[str, str]:
    return {t.thread_id: t.given_title for t in recent_threads(store, 100)}


def test_a_renamed_thread_keeps_its_title_through_export_and_import(store: MemoryStore, tmp_path: Path) -> None:
    session = ChatSession(load_settings(env={}), store=store)
    session.record("plan the garden", "tomatoes first", [])
    run_command(session, "/rename Garden  plans")
    other = ChatSession(session.settings, store=store)
    other.record("untitled thread", "ok", [])
    buffer = io.StringIO()
    outcome = export_memory(store, buffer)
    lines = [json.loads(line) for line in buffer.getvalue().splitlines()]
    # Titles come last, one per titled thread: the untitled thread has none.
    assert lines[-1] == {"kind": "thread", "thread_id": session.thread_id, "title": "Garden plans"}
    assert [r["kind"] for r in lines].count("thread") == 1 and outcome.titles == 1
    target = fresh_store(tmp_path)
    imported = import_memory(target, write_lines(tmp_path / "m.jsonl", lines))
    assert (imported.added, imported.titles, imported.titles_added) == (2, 1, 1)
    assert titles_of(target) == {session.thread_id: "Garden plans", other.thread_id: ""}
    assert run_command(ChatSession(session.settings, store=target), "/threads").rows[-1][3] == "Garden plans"
    # Importing again changes nothing; a title given since the export is kept.
    rename_thread(target, session.thread_id, "Renamed later")
    again = import_memory(target, tmp_path / "m.jsonl")
    assert (again.added, again.titles_added) == (0, 0)
    assert titles_of(target)[session.thread_id] == "Renamed later"


def test_a_file_without_titles_still_imports(tmp_path: Path) -> None:
    target = fresh_store(tmp_path)
    outcome = import_memory(target, write_lines(tmp_path / "old.jsonl", [exchange_line(1), exchange_line(2)]))
    assert (outcome.added, outcome.titles, outcome.titles_added) == (2, 0, 0)
    assert titles_of(target) == {"t": ""}


def test_a_title_names_only_a_thread_whose_exchanges_the_file_holds(tmp_path: Path) -> None:
    records = [
        exchange_line(1, "a"),
        {"kind": "thread", "thread_id": "a", "title": "  first\ttitle  "},
        {"kind": "thread", "thread_id": "elsewhere", "title": "no exchanges here"},
    ]
    target = fresh_store(tmp_path)
    outcome = import_memory(target, write_lines(tmp_path / "m.jsonl", records))
    assert (outcome.titles, outcome.titles_added) == (2, 1)
    assert titles_of(target) == {"a": "first title"}  # whitespace as /rename leaves it
    assert target.threads.titles(["elsewhere"]) == {}


@pytest.mark.parametrize(
    ("title_line", "needle"),
    [
        ({"kind": "thread", "thread_id": "t", "title": 5}, "title must be a string"),
        ({"kind": "thread", "thread_id": "t"}, "title must be a string"),
        ({"kind": "thread", "thread_id": "", "title": "x"}, "thread_id must be a non-empty string"),
        ({"kind": "thread", "thread_id": "t", "title": "   "}, "title must not be empty"),
        ({"kind": "thread", "thread_id": "t", "title": "x" * 201}, "title is 201 characters; a title is at most 200"),
        # Line breaks, terminal controls and bidi overrides are dropped, not refused (issue 23:
        # a backup that cannot be restored is data loss): tests/unit/test_trust_titles.py.
        ({"kind": "thread", "thread_id": "t", "title": "\x1b\x07\u202e"}, "title must not be empty"),
        ({"kind": "thread", "thread_id": "t", "title": "\udfff"}, "lone surrogate"),
    ],
)
def test_a_bad_title_names_its_line_and_nothing_is_imported(
    tmp_path: Path, title_line: dict[str, Any], needle: str
) -> None:
    target = fresh_store(tmp_path)
    path = write_lines(tmp_path / "bad.jsonl", [exchange_line(1), exchange_line(2), title_line])
    with pytest.raises(InputFileError) as caught:
        import_memory(target, path)
    message = str(caught.value)
    assert "bad.jsonl:3: " in message and needle in message and message.endswith("; nothing was imported")
    assert target.count("exchange") == 0 and target.threads.titles(["t"]) == {}


def test_the_threads_and_history_commands_count_in_words(store: MemoryStore) -> None:
    session = ChatSession(load_settings(env={}), store=store)
    session.record("only prompt", "ok", [])
    assert run_command(session, "/threads").text == "1 recent thread; /continue ID resumes one"
    assert run_command(session, "/history").text == "1 prompt"
    session.record("second prompt", "ok", [])
    assert run_command(session, "/history").text == "2 prompts"
    resumed = run_command(ChatSession(session.settings, store=store), f"/continue {session.thread_id}")
    assert resumed.text == f"Resumed thread {session.thread_id[:8]}: 2 exchanges."


def test_the_cli_export_and_import_say_what_they_did_in_words(cli: Cli, tmp_path: Path) -> None:
    source = write_lines(tmp_path / "in.jsonl", [
        exchange_line(1), {"kind": "thread", "thread_id": "t", "title": "Kitchen renovation"},
    ])
    imported = cli("--import-memory", str(source))
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.strip() == f"Imported 1 record from {source}; 1 thread title restored"
    out = tmp_path / "out.jsonl"
    exported = cli("--export-memory", str(out))
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.strip() == f"Exported 1 exchange, 0 document chunks and 1 thread title to {out}"
    assert json.loads(out.read_text().splitlines()[-1]) == {"kind": "thread", "thread_id": "t", "title": "Kitchen renovation"}
    as_json = cli("--export-memory", str(out), "--output", "json").json()["result"]
    assert (as_json["exchanges"], as_json["titles"]) == (1, 1)
    bad = write_lines(tmp_path / "bad.jsonl", [exchange_line(2), {"kind": "thread", "thread_id": "t", "title": ""}])
    refused = cli("--import-memory", str(bad))
    assert refused.returncode == 1 and f"{bad}:2: title must not be empty; nothing was imported" in refused.stderr
