"""`/import PATH` in the chats: the same import as `--import-history`, with the chat's progress and stop."""

from __future__ import annotations

from pathlib import Path

from ocat.commands import run_command
from ocat.config.loading import load_settings
from ocat.memory import MemoryStore
from ocat.chat.session import ChatSession
from tests.support.history_fixtures import gpt_linear, legacy_db, three_conversations, write_zip


def test_import_reports_what_it_added_and_a_second_run_adds_nothing(store: MemoryStore, tmp_path: Path) -> None:
    export = write_zip(tmp_path / "export.zip", {"conversations.json": three_conversations()})
    session = ChatSession(load_settings(env={}), store=store)
    seen: list[tuple[str, int, int]] = []
    session.progress.start(lambda label, done, total: seen.append((label, done, total)))
    first = run_command(session, f"/import {export}")
    assert not first.error and first.text.startswith("3 conversations: 0 already here, 3 new, 3 exchanges")
    assert seen and seen[-1] == ("Importing export.zip", 3, 3)  # the chat's progress bar hears it
    again = run_command(session, f"/import {export}")
    assert again.text.startswith("3 conversations: 3 already here, 0 new, 0 exchanges")
    assert store.count("exchange") == 3


def test_a_stop_is_heard_within_a_step_and_the_same_command_completes_it(store: MemoryStore, tmp_path: Path) -> None:
    many = [gpt_linear(f"c{i}", f"C{i}", [("user", f"q{i}.{t}") if t % 2 == 0 else ("assistant", f"a{i}.{t}")
                                          for t in range(40)]) for i in range(6)]
    export = write_zip(tmp_path / "many.zip", {"conversations.json": many})
    session = ChatSession(load_settings(env={}), store=store)
    session.progress.start(None)
    session.progress.stop()  # Esc before the first step ends: the import stops after it
    result = run_command(session, f"/import {export}")
    assert "stopped: run the same command again" in result.text
    written = store.count("exchange")
    # Stopped within a step of embedding (16 exchanges), inside a conversation if need be: what
    # was written is whole exchanges with their thread's title, and the rerun completes the rest.
    assert 0 < written < 120
    session.progress.start(None)
    assert "stopped" not in run_command(session, f"/import {export}").text
    assert store.count("exchange") == 120


def test_a_path_that_is_no_export_is_an_error_line(store: MemoryStore, tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("just notes")
    result = run_command(ChatSession(load_settings(env={}), store=store), f"/import {other}")
    assert result.error and "is not a ChatGPT, Claude or llm export" in result.text


def test_a_folder_of_several_exports_imports_each(store: MemoryStore, tmp_path: Path) -> None:
    write_zip(tmp_path / "chatgpt.zip", {"conversations.json": three_conversations()})
    legacy_db(tmp_path / "logs.db")
    session = ChatSession(load_settings(env={}), store=store)
    result = run_command(session, f"/import {tmp_path}")
    lines = result.text.splitlines()
    assert not result.error
    assert lines[0].startswith("chatgpt.zip (ChatGPT): 3 conversations: 0 already here, 3 new, 3 exchanges")
    assert lines[1].startswith("logs.db (llm): ") and "0 new" not in lines[1]
