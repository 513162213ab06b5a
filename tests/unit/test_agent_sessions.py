"""Coding agents' sessions for `ocat --import-history`: Claude Code's and Codex's JSON Lines read
into exchanges (parsers, no store), and the import's record of the files it read (a store with
the fake embedder). The CLI is driven in tests/cli/test_agent_import.py."""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from ocat.errors import InputFileError
from ocat.history_import import (
    ImportedConversation,
    UnchangedSession,
    count_conversations,
    detect_format,
    read_history,
)
from ocat.history_import import agent_sessions
from ocat.history_import.agent_sessions import default_folder, hook_transcript
from ocat.history_import.claude_code import read_session as read_claude_code
from ocat.history_import.codex import read_session as read_codex
from ocat.operations.history import import_history
from tests.support.agent_fixtures import (
    CODEX_SESSION,
    PROJECT,
    SESSION,
    ClaudeCodeSession,
    CodexSession,
    agent_file,
    claude_path,
    ferry_fix_session,
    rollout_path,
    tide_session,
)


def pairs(item: Any) -> list[tuple[str, str]]:
    """A conversation's exchanges as (prompt, answer) pairs."""
    assert isinstance(item, ImportedConversation), item
    return [(e.prompt, e.answer) for e in item.exchanges]


def test_a_claude_code_session_is_its_human_prompts_with_the_answers_and_the_tools_used(tmp_path: Path) -> None:
    session = read_claude_code(ferry_fix_session().write(tmp_path / f"{SESSION}.jsonl"))
    assert pairs(session) == [
        ("The ferry timetable parser crashes on the Sunday schedule with a KeyError 'sun'",
         "The DAYS table has no entry for 'sun'; I will add it.\n\nDone.\n\n(used Read, Edit, Bash)"),
        ("Also add a test for the Sunday schedule", "Added test_sunday.py; it passes.\n\n(used Write)"),
    ]
    # Thinking, tool output, slash commands and their output, meta records and the sub-agent's
    # prompt are not exchanges, and nothing of them is in the answers.
    said = " ".join(e.prompt + e.answer for e in session.exchanges)
    for left_out in ("abbreviated differently", "12 passed", "Set model to opus", "Caveat", "/model", "sub-agent"):
        assert left_out not in said
    assert session.source == "claude-code" and session.source_id == SESSION
    assert session.title == "Fix KeyError for Sunday ferry timetable"
    assert session.project == PROJECT and {e.git_branch for e in session.exchanges} == {"main"}
    # Each exchange's id is its prompt's uuid; its time is the prompt's.
    assert [e.source_id for e in session.exchanges] == [
        r["uuid"] for r in ferry_fix_session().records
        if r["type"] == "user" and r["message"]["content"] in (
            "The ferry timetable parser crashes on the Sunday schedule with a KeyError 'sun'",
            [{"type": "text", "text": "Also add a test for the Sunday schedule"}])
    ]
    assert session.created is not None and session.exchanges[0].timestamp is not None


def test_without_a_summary_the_first_prompt_is_the_title_and_a_slash_command_answered_is_kept(
    tmp_path: Path,
) -> None:
    session = (
        ClaudeCodeSession()
        .prompt("<command-message>fix-issue is running…</command-message>\n<command-name>/fix-issue</command-name>\n"
                "<command-args>42</command-args>")
        .prompt("Fix issue 42: the harbour map is blank on Safari", isMeta=True)
        .says("Fixed: the SVG had no viewBox.")
        .prompt("<command-name>/clear</command-name>\n<command-args></command-args>")
        .prompt("[Request interrupted by user]")
        .prompt("  Why was the map blank on Safari, and was it only Safari?\nMore detail here.")
        .says("Safari needs a viewBox to scale an SVG.")
    )
    read = read_claude_code(session.write(tmp_path / "s.jsonl"))
    assert pairs(read) == [
        ("/fix-issue 42", "Fixed: the SVG had no viewBox."),
        ("Why was the map blank on Safari, and was it only Safari?\nMore detail here.",
         "Safari needs a viewBox to scale an SVG."),
    ]
    assert read.title == "/fix-issue 42"
    untitled = read_claude_code(ClaudeCodeSession().prompt("x" * 200).says("ok").write(tmp_path / "t.jsonl"))
    assert len(untitled.title) == 80 and untitled.title.endswith("…")


def test_a_broken_line_is_named_and_skipped_and_a_line_being_written_is_left_for_later(tmp_path: Path) -> None:
    lines = ferry_fix_session().lines()
    lines.insert(9, '{"type": "user", "message": ')  # a whole line that is not JSON
    path = tmp_path / "s.jsonl"
    # The last line has no newline and does not parse: the agent is still writing it.
    path.write_text("\n".join(lines) + '\n{"type": "assistant", "message": {"content": [{"type": "te', encoding="utf-8")
    session = read_claude_code(path)
    assert session.warnings == (f"{path}:10: not a JSON line (Expecting value), skipped",)
    assert len(session.exchanges) == 2
    # A last line without its newline that parses is read.
    whole = tmp_path / "whole.jsonl"
    whole.write_text("\n".join(ferry_fix_session().says("One more thing.").lines()), encoding="utf-8")
    assert read_claude_code(whole).exchanges[-1].answer.startswith("Added test_sunday.py; it passes.\n\nOne more thing.")


def test_a_line_past_the_bound_is_named_and_skipped_and_the_rest_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 44: a 1 GB line took 3.3 GB to read; lines are read with a bound (lowered here)."""
    monkeypatch.setattr(agent_sessions, "MAX_LINE_BYTES", 4096, raising=False)
    lines = ferry_fix_session().lines()
    huge = json.dumps({"type": "user", "message": {"role": "user", "content": [
        {"tool_use_id": "toolu_x", "type": "tool_result", "content": "log line\n" * 1_000_000}]}})
    lines.insert(9, huge)
    path = tmp_path / "s.jsonl"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    tracemalloc.start()
    try:
        session = read_claude_code(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert session.warnings == (
        f"{path}:10: a line of {len(huge) + 1:,} bytes is over the limit of 4,096 bytes, skipped",)
    assert pairs(session) == pairs(read_claude_code(ferry_fix_session().write(tmp_path / "plain.jsonl")))
    assert peak < len(huge) // 2  # the 8 MB line was never held whole
    # The last line, past the bound and without its newline, is named too (the rest is read).
    path.write_text("".join(line + "\n" for line in ferry_fix_session().lines()) + huge, encoding="utf-8")
    assert read_claude_code(path).warnings == (
        f"{path}:{len(ferry_fix_session().lines()) + 1}: a line of {len(huge):,} bytes is over the limit of "
        "4,096 bytes, skipped",)


def test_a_session_that_is_a_pipe_or_a_device_is_refused(tmp_path: Path) -> None:
    """Issue 44 (B8): a session path (a hook's transcript_path) is read as PATH is: regular files only."""
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    for special in (fifo, Path("/dev/zero")):
        with pytest.raises(InputFileError, match="not a regular file"):
            read_history(special, "claude-code")
        with pytest.raises(InputFileError, match="not a regular file"):
            read_claude_code(special)


def test_a_codex_session_leaves_out_its_context_reasoning_and_tool_output(tmp_path: Path) -> None:
    session = read_codex(tide_session().write(tmp_path / "rollout.jsonl"))
    assert pairs(session) == [
        ("Tide times are an hour off after the clocks change; fix the tide table",
         "The tide table built naive datetimes; I made them aware of Europe/Oslo.\n\nTests pass.\n\n(used shell)"),
    ]
    said = " ".join(e.prompt + e.answer for e in session.exchanges)
    for left_out in ("environment_context", "Always run the tests", "thinking", "8 passed", "tzinfo=None"):
        assert left_out not in said
    assert session.source == "codex" and session.source_id == CODEX_SESSION
    assert session.project == PROJECT and session.exchanges[0].git_branch == "fix-tides"
    assert session.title == "Tide times are an hour off after the clocks change; fix the tide table"
    # A turn's id is its place in the session: the same when the session has grown.
    grown = read_codex(tide_session().prompt("And the ferry times?").says("Same fix.").write(tmp_path / "g.jsonl"))
    assert [e.source_id for e in grown.exchanges] == ["turn-1", "turn-2"]


def test_folders_of_sessions_are_told_apart_by_content_and_sub_agents_are_left_out(tmp_path: Path) -> None:
    projects, sessions = tmp_path / "projects", tmp_path / "sessions"
    first = ferry_fix_session().write(claude_path(projects))
    agent_file(first.parent)
    ClaudeCodeSession("second", cwd="/home/ada/src/tides").prompt("hello").says("hi").write(
        claude_path(projects, "second", "/home/ada/src/tides"))
    (projects / "notes.txt").write_text("not a session")
    rollout = tide_session().write(rollout_path(sessions))
    assert detect_format(first) == detect_format(projects) == "claude-code"
    assert detect_format(rollout) == detect_format(sessions) == detect_format(tmp_path / "sessions" / "2025") == "codex"
    assert count_conversations(projects) == 2
    read = list(read_history(projects))
    assert sorted(item.source_id for item in read if isinstance(item, ImportedConversation)) == sorted(
        ["second", SESSION])
    assert len(read) == 2
    assert "sub-agent" not in json.dumps([pairs(item) for item in read])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputFileError, match="holds no session files"):
        read_history(tmp_path / "empty", "codex")


def test_the_default_folders_and_a_hooks_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_folder("claude-code") == Path.home() / ".claude" / "projects"
    assert default_folder("codex", {}) == Path.home() / ".codex" / "sessions"
    assert default_folder("codex", {"CODEX_HOME": str(tmp_path / "cx")}) == tmp_path / "cx" / "sessions"
    hook = tmp_path / "stdin"
    hook.write_text(json.dumps({"session_id": "abc", "transcript_path": "~/.claude/projects/-x/abc.jsonl",
                                "cwd": "/x", "hook_event_name": "SessionEnd", "reason": "exit"}))
    assert hook_transcript(hook) == Path.home() / ".claude" / "projects" / "-x" / "abc.jsonl"
    hook.write_text(json.dumps({"transcript_path": "/x.jsonl"}))  # no hook's own key: any JSON could say that
    assert hook_transcript(hook) is None
    hook.write_text("[]")
    assert hook_transcript(hook) is None


def test_a_rerun_skips_unchanged_files_and_reads_grown_or_touched_ones(store: Any, tmp_path: Path) -> None:
    path = ferry_fix_session().write(claude_path(tmp_path / "projects"))
    first = import_history(store, tmp_path / "projects")
    assert (first.new, first.exchanges) == (1, 2)
    # Same size, same time: not read at all (a change that keeps both is not seen, by design).
    before = path.stat()
    path.write_text(path.read_text().replace("Done.", "Dune."))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert [type(item) for item in read_history(path, unchanged=lambda _: True)] == [UnchangedSession]
    again = import_history(store, tmp_path / "projects")
    assert (again.already_here, again.exchanges) == (1, 0)
    # A new modification time with the same size: read again (its exchanges are already here).
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
    touched = import_history(store, tmp_path / "projects")
    assert (touched.already_here, touched.exchanges) == (1, 0)
    # A grown session: only its new turn is added.
    ferry_fix_session().prompt("Now the Saturday schedule").says("Saturday works already.").write(path)
    grown = import_history(store, tmp_path / "projects")
    assert (grown.grown, grown.exchanges) == (1, 1)
    stored = store.exchanges.get(include=["metadatas"])["metadatas"]
    assert {m["project"] for m in stored} == {PROJECT} and {m["git_branch"] for m in stored} == {"main"}
    assert len(stored) == 3


def test_project_and_git_branch_travel_in_an_export_and_old_exchanges_stay_valid() -> None:
    from ocat.memory.storage.export_lines import parse_line
    from ocat.records import Exchange

    made = Exchange("q", "a", "t", "s", project=PROJECT, git_branch="main")
    line = json.dumps({"kind": "exchange", **made.to_record()})
    assert parse_line(line, 1, "x.jsonl") == made
    old = Exchange("q", "a", "t", "s")
    assert "project" not in old.to_metadata() and Exchange.from_metadata(old.to_metadata()) == old
    with pytest.raises(InputFileError, match="x.jsonl:3: project must be a string"):
        parse_line(json.dumps({"kind": "exchange", **made.to_record(), "project": 7}), 3, "x.jsonl")


def _lexical(store: Any, text: str) -> list[str]:
    """The exchange ids the lexical index finds for `text`."""
    from ocat.memory.storage.terms import query_terms

    return [record_id for record_id, _ in store.lexical.search("exchange", query_terms(text), 5)]


def test_a_turn_imported_mid_answer_is_updated_in_place_once_the_answer_is_written(
    store: Any, tmp_path: Path
) -> None:
    """Issue 44 (B6): a session imported with the prompt written and the answer not yet kept an
    empty answer for good; the rerun said "already here"."""
    from ocat.operations.history_sessions import ledger_path

    asked = ClaudeCodeSession().prompt("Why does the harbour map flicker on zoom?")
    path = asked.write(claude_path(tmp_path / "projects"))
    first = import_history(store, path)
    assert (first.new, first.exchanges, first.unfinished) == (1, 1, 1)
    assert "1 turn may still be going on: a later import updates it" in first.sentence()
    (stored,) = store.exchanges.get(include=["metadatas"])["metadatas"]
    assert stored["assistant_response"] == ""
    exchange_id = stored["exchange_id"]
    same = import_history(store, path)
    assert (same.already_here, same.exchanges, same.updated) == (1, 0, 0)
    asked.tool("Read", {"file_path": "map.js"}, "...").says("The tile layer redraws on every zoom step; debounced it.")
    asked.write(path)
    done = import_history(store, path)
    assert (done.completed, done.updated, done.exchanges, done.new, done.already_here) == (1, 1, 0, 0, 0)
    assert done.unfinished == 0
    assert done.sentence() == "1 conversation: 0 already here, 0 new, 1 with an exchange updated, 0 exchanges, 1 updated"
    # The same exchange, updated in place: in Chroma, the lexical index and the prompt vectors.
    got = store.exchanges.get(include=["metadatas", "documents"])
    assert got["ids"] == [exchange_id] and store.count("exchange") == 1
    answer = "The tile layer redraws on every zoom step; debounced it.\n\n(used Read)"
    assert got["metadatas"][0]["assistant_response"] == answer and "debounced" in got["documents"][0]
    assert got["metadatas"][0]["thread_title"] == "Why does the harbour map flicker on zoom?"
    assert _lexical(store, "tile layer debounced") == [exchange_id]
    assert store.lexical.count("exchange") == 1 and exchange_id in store.prompts.ids()
    # Reruns stay idempotent, with the ledger or without it (every file read and compared again).
    assert import_history(store, path).already_here == 1
    ledger_path().unlink()
    again = import_history(store, path)
    assert (again.already_here, again.updated, again.exchanges) == (1, 0, 0)


def test_a_codex_turn_that_had_only_used_a_tool_gets_its_answer_later(store: Any, tmp_path: Path) -> None:
    session = CodexSession().prompt("Make the tide chart print in UTC").tool("shell", {"command": ["rg", "tz"]}, "x")
    path = session.write(rollout_path(tmp_path / "sessions"))
    first = import_history(store, path)
    assert (first.new, first.unfinished) == (1, 1)
    assert [m["assistant_response"] for m in store.exchanges.get(include=["metadatas"])["metadatas"]] == [
        "(used shell)"]
    session.says("Printed in UTC now.").prompt("And the ferry chart?").says("Same.")
    session.write(path)
    grown = import_history(store, path)
    assert (grown.grown, grown.exchanges, grown.updated, grown.unfinished) == (1, 1, 1, 0)
    answers = sorted(m["assistant_response"] for m in store.exchanges.get(include=["metadatas"])["metadatas"])
    assert answers == ["Printed in UTC now.\n\n(used shell)", "Same."]
