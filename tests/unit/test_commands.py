"""The slash commands, run against a real store (fake embedder) the way every front end runs them."""

from __future__ import annotations

from pathlib import Path

import pytest


from ocat.commands import Choose, Confirm, commands, is_command, run_command
from ocat.config.loading import load_settings
from ocat.memory import MemoryStore
from ocat.chat.session import ChatSession


def test_help_lists_every_command_by_purpose_and_explains_one(session: ChatSession) -> None:
    from ocat.commands.registry import GROUPS

    listed = run_command(session, "/help")
    assert listed.columns == tuple(GROUPS.values())
    names = [cell for row in listed.rows for cell in row if cell]
    assert sorted(names) == sorted(f"/{c.name}" for c in commands())  # each once, read from the registry
    for column, group in enumerate(GROUPS):
        assert {row[column] for row in listed.rows} - {""} == {f"/{c.name}" for c in commands() if c.group == group}
    assert "/continue" in run_command(session, "/help continue").text
    assert run_command(session, "/help nope").error


def test_help_name_gives_each_argument_whole_in_the_line_mode_too(
    session: ChatSession, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """/help's descriptions wrap in the window (tests/app/test_help_and_focus.py) and in the line
    mode, each under its own column, never cut, however narrow the terminal."""
    import os

    from ocat.commands.registry import REGISTRY
    from ocat.repl import render_result

    monkeypatch.setattr("shutil.get_terminal_size", lambda *a, **k: os.terminal_size((40, 24)))
    printed = render_result(run_command(session, "/help vquery"))
    assert all(len(line) <= 40 for line in printed.splitlines()[1:] if not line.startswith("Example"))
    table = printed.split("argument", 1)[1]
    for argument in REGISTRY["vquery"].arguments:
        assert " ".join(argument.describe().split()) in " ".join(table.split())


def test_vstats_shows_the_config_path_documents_and_chunks_and_what_the_floor_is(
    session: ChatSession, tmp_path: Path
) -> None:
    from ocat.config.locations import user_config_file

    notes = tmp_path / "notes.md"
    notes.write_text("\n\n".join(f"## Part {i}\n\n" + f"part {i} says its own thing. " * 20 for i in range(3)))
    added = run_command(session, f"/vdoc {notes}")
    assert not added.error, added.text
    shown = dict(run_command(session, "/vstats").rows)
    assert shown["documents"] == "1" and int(shown["document_chunks"]) > 1
    assert shown["floor"] == "not measured yet" and shown["floor_raise"] == "0.0"
    # No user file: where one would be read from. docs/chat.md says /vstats shows the config path.
    assert shown["config"] == f"none (the shipped defaults; yours would be {user_config_file()})".replace(
        str(Path.home()), "~")
    config = tmp_path / "config.yaml"
    config.write_text("display:\n  context_mode: summary\n")
    configured = ChatSession(load_settings(str(config), env={}), store=session.session_memory.store)
    result = run_command(configured, "/vstats")
    assert dict(result.rows)["config"] == str(config)
    assert "floor_raise: how much more" in result.markdown


def test_unknown_commands_suggest_the_nearest(session: ChatSession) -> None:
    result = run_command(session, "/vquerry x")
    assert result.error and "did you mean /vquery?" in result.text
    assert is_command("/x") and not is_command("//not a command") and not is_command("hello")


def test_continue_resumes_a_thread_with_a_new_session_and_the_next_sequence(store: MemoryStore) -> None:
    settings = load_settings(env={})
    first = ChatSession(settings, store=store)
    first.record("plan the garden", "tomatoes first", [])
    first.record("and then?", "beans", [])
    later = ChatSession(settings, store=store)
    result = run_command(later, f"/continue {first.thread_id[:8]}")
    assert result.conversation_replaced and not result.error
    assert [e.user_prompt for e in later.history] == ["plan the garden", "and then?"]
    added = later.record("what about herbs?", "basil", []).exchange
    stored = store.get(added.exchange_id)
    assert stored.thread_id == first.thread_id
    assert stored.session_id == later.session_id != first.session_id
    assert stored.thread_continuation_seq == 1
    assert run_command(later, "/continue nosuchthread").error


def test_threads_lists_recent_threads_with_their_first_prompt(session: ChatSession, store: MemoryStore) -> None:
    session.record("first question here", "answer", [])
    result = run_command(session, "/threads")
    assert result.rows and result.rows[0][0] == session.thread_id[:8]
    assert result.rows[0][3] == "first question here"
    offered = run_command(session, "/continue").request
    assert isinstance(offered, Choose) and [value for value, _ in offered.options] == [session.thread_id]
    assert "first question here" in offered.options[0][1]


def test_vadd_vquery_vget_and_vdelete_with_confirmation(session: ChatSession, store: MemoryStore) -> None:
    assert run_command(session, "/vadd the spare key is under the blue flowerpot").text.startswith("Remembered")
    assert run_command(session, "/vadd the spare key is under the blue flowerpot").text == "Already remembered."
    found = run_command(session, '/vquery "spare key flowerpot" 3')
    assert found.rows and "flowerpot" in found.rows[0][-1]
    chunk_id = list(store.iter_ids("document"))[0]
    shown = run_command(session, f"/vget {chunk_id[:12]}")
    assert shown.markdown == "the spare key is under the blue flowerpot" and ("source", "note") in shown.rows
    ask = run_command(session, f"/vdelete {chunk_id[:12]}")
    assert isinstance(ask.request, Confirm) and ask.request.typed.endswith("--yes")
    assert "This deletes" in ask.request.question and store.count("document") == 1
    done = run_command(session, f"/vdelete {chunk_id[:12]} --yes")
    assert done.text.startswith("Deleted") and store.count("document") == 0
    assert run_command(session, "/vget nothing-like-this").error
    assert run_command(session, "/vquery").error


def test_vdoc_adds_a_file_and_vget_session_lists_exchanges(session: ChatSession, tmp_path: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("Standup moved to 9:30.")
    assert "Added 1 chunk" in run_command(session, f"/vdoc {notes}").text
    assert run_command(session, f"/vdoc {tmp_path / 'missing.md'}").error
    session.record("hi", "hello", [])
    assert len(run_command(session, "/vget session").rows) == 1


def test_vdoc_docs_name_reads_inside_the_docs_folder_only(store: MemoryStore, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "guides").mkdir(parents=True)
    (docs / "guides" / "setup.md").write_text("Install with pipx.")
    (tmp_path / "secret.md").write_text("outside the docs folder")
    (docs / "link.md").symlink_to(tmp_path / "secret.md")
    without = ChatSession(load_settings(env={}), store=store)
    assert "vector_store.docs_folder" in run_command(without, "/vdoc docs:guides/setup.md").text
    session = ChatSession(load_settings(env={}, overrides={"vector_store.docs_folder": str(docs)}), store=store)
    assert "Added 1 chunk" in run_command(session, "/vdoc docs:guides/setup.md").text
    assert not run_command(session, "/vdoc docs:guides").error  # the folder: its file replaces its old self
    assert store.count("document") == 1
    for escape in ("docs:../secret.md", "docs:link.md", f"docs:{tmp_path / 'secret.md'}"):
        result = run_command(session, f"/vdoc {escape}")
        assert result.error and "outside the docs folder" in result.text, escape
    assert run_command(session, "/vdoc docs:").error
    assert store.count("document") == 1


def test_conversation_commands(session: ChatSession) -> None:
    session.record("one", "1", [])
    assert run_command(session, "/history").rows[0][1] == "one"
    assert run_command(session, "/model other/model").text.startswith("Model: other/model")
    assert session.settings.llm.model == "other/model"
    assert run_command(session, "/showcontext on").text == "Context display: on"
    assert run_command(session, "/showcontext loud").error
    old_thread = session.thread_id
    assert run_command(session, "/clear").conversation_replaced and session.history == [] and session.thread_id != old_thread
    assert run_command(session, "/exit").quit


def test_memory_commands_say_when_memory_is_off() -> None:
    off = ChatSession(load_settings(env={}, overrides={"vector_store.enabled": False}))
    off.session_memory.error = "memory is disabled"
    for line in ("/vquery x", "/vadd x", "/vstats", "/threads", "/continue abc", "/vget x"):
        result = run_command(off, line)
        assert result.error and "memory is off" in result.text, line
