"""`ocat --import-history` of coding agents' sessions, as a user and a Claude Code hook run it:
a session file, a folder, the agents' own folders without a path, reruns, a grown session, the
hook's JSON on stdin, and a search that finds a fix with the folder it was made in.

The parsers are tested in tests/unit/test_agent_sessions.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.agent_fixtures import (
    PROJECT,
    SESSION,
    CodexSession,
    agent_file,
    claude_path,
    ferry_fix_session,
    rollout_path,
    tide_session,
)
from tests.support.cli import Cli, stats

pytestmark = pytest.mark.slow


def test_a_claude_code_session_file_imports_and_a_search_finds_the_fix_with_its_project(
    cli: Cli, tmp_path: Path
) -> None:
    path = ferry_fix_session().write(claude_path(tmp_path / "projects"))
    with path.open("a", encoding="utf-8") as out:
        out.write("{not json\n")
    run = cli("--import-history", str(path), "--output", "json")
    assert run.returncode == 0, run.stderr
    result = run.json()["result"]
    assert (result["source"], result["new"], result["exchanges"]) == ("claude-code", 1, 2)
    assert result["warnings"] == [f"{path}:{len(ferry_fix_session().records) + 1}: not a JSON line "
                                  "(Expecting property name enclosed in double quotes), skipped"]
    assert f"ocat: warning: {path}:" in run.stderr and "Traceback" not in run.stderr
    found = cli("--query-vector-store", "KeyError sun in the Sunday ferry timetable", "--output", "json")
    assert found.returncode == 0, found.stderr
    best = found.json()["result"]["results"][0]
    assert "(used Read, Edit, Bash)" in best["text"]
    assert best["metadata"]["project"] == PROJECT and best["metadata"]["git_branch"] == "main"
    assert best["metadata"]["thread_title"] == "Fix KeyError for Sunday ferry timetable"


def test_a_folder_is_told_from_its_content_a_rerun_adds_nothing_and_a_grown_session_only_its_new_turns(
    cli: Cli, tmp_path: Path
) -> None:
    sessions = tmp_path / "sessions"
    rollout = tide_session().write(rollout_path(sessions))
    run = cli("--import-history", str(sessions))
    assert run.returncode == 0, run.stderr
    assert run.stdout == "1 conversation: 0 already here, 1 new, 1 exchange\n"
    again = cli("--import-history", str(sessions))
    assert again.returncode == 0, again.stderr
    assert again.stdout == "1 conversation: 1 already here, 0 new, 0 exchanges\n"
    tide_session().prompt("Do the ferry times need the same fix?").says("Yes; done the same way.").write(rollout)
    grown = cli("--import-history", str(sessions), "--from", "codex")
    assert grown.returncode == 0, grown.stderr
    assert grown.stdout == "1 conversation: 0 already here, 0 new, 1 with new exchanges, 1 exchange\n"
    assert stats(cli)["exchanges"] == 2


def test_without_a_path_the_agents_own_folders_are_imported(cli: Cli, isolated_home: Path, tmp_path: Path) -> None:
    (isolated_home / ".codex" / "sessions").mkdir(parents=True)  # made by Codex, no session yet
    missing = cli("--import-history")
    assert missing.returncode == 1
    assert "neither ~/.claude/projects (Claude Code) nor ~/.codex/sessions (Codex) holds a session" in missing.stderr
    first = ferry_fix_session().write(claude_path(isolated_home / ".claude" / "projects"))
    agent_file(first.parent)
    codex_home = tmp_path / "codex-home"
    tide_session().write(rollout_path(codex_home / "sessions"))
    run = cli("--import-history", env={"CODEX_HOME": str(codex_home)})
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "projects (Claude Code): 1 conversation: 0 already here, 1 new, 2 exchanges",
        "sessions (Codex): 1 conversation: 0 already here, 1 new, 1 exchange",
    ]
    only = cli("--import-history", "--from", "claude-code", "--output", "json")
    assert only.returncode == 0, only.stderr
    assert only.json()["result"]["already_here"] == 1
    empty = cli("--import-history", "--from", "codex")
    assert empty.returncode == 1 and "and ~/.codex/sessions (Codex) holds no session" in empty.stderr
    export_format = cli("--import-history", "--from", "chatgpt")
    assert export_format.returncode == 2 and "needs the path of the chatgpt export" in export_format.stderr


def test_the_claude_code_hook_imports_the_session_it_names_quietly(cli: Cli, isolated_home: Path) -> None:
    transcript = ferry_fix_session().write(claude_path(isolated_home / ".claude" / "projects"))
    hook = {"session_id": SESSION, "transcript_path": str(transcript), "cwd": PROJECT,
            "hook_event_name": "SessionEnd", "reason": "exit"}
    run = cli("--import-history", "-", input=json.dumps(hook))
    assert (run.returncode, run.stdout) == (0, ""), run.stderr
    assert stats(cli)["exchanges"] == 2
    again = cli("--import-history", "-", input=json.dumps(hook | {"hook_event_name": "Stop"}))
    assert (again.returncode, again.stdout) == (0, ""), again.stderr
    assert stats(cli)["exchanges"] == 2
    # A hook that cannot import says so in one line and exits 1 (never 2: a Stop hook reads 2 as
    # "do not stop").
    gone = cli("--import-history", "-", input=json.dumps(hook | {"transcript_path": "/nowhere/x.jsonl"}))
    assert (gone.returncode, gone.stdout) == (1, "")
    assert gone.stderr == "ocat: the Claude Code session /nowhere/x.jsonl was not imported: no such file or folder: " \
                          "/nowhere/x.jsonl\n"


def test_a_hook_naming_a_pipe_or_a_device_is_refused_as_a_path_is(cli: Cli, tmp_path: Path) -> None:
    """Issue 44 (B8): `transcript_path` /dev/zero read until memory ran out and exited 0; a FIFO hung."""
    fifo = tmp_path / "session.jsonl"
    os.mkfifo(fifo)
    for special, what in ((Path("/dev/zero"), "a device"), (fifo, "a pipe")):
        hook = {"session_id": SESSION, "transcript_path": str(special), "hook_event_name": "Stop"}
        run = cli("--import-history", "-", input=json.dumps(hook))
        assert (run.returncode, run.stdout) == (1, ""), run.stderr
        assert run.stderr.startswith(f"ocat: the Claude Code session {special} was not imported: {special} is {what}, "
                                     "not a regular file"), run.stderr
        assert len(run.stderr.splitlines()) == 1


def test_the_cron_recipe_updates_a_turn_it_imported_mid_answer(cli: Cli, tmp_path: Path) -> None:
    """Issue 44 (B6): `ocat --import-history` every 30 minutes over Codex's sessions met a turn
    whose answer was not written yet, kept `(used shell)` for it for good, and said "already here"."""
    sessions = tmp_path / "sessions"
    session = CodexSession().prompt("Why is the tide chart an hour off in winter?")
    session.tool("shell", {"command": ["rg", "utcoffset"]}, "tides.py:40")
    rollout = session.write(rollout_path(sessions))
    first = cli("--import-history", str(sessions))
    assert (first.returncode, first.stdout) == (0, "1 conversation: 0 already here, 1 new, 1 exchange; 1 turn may "
                                                   "still be going on: a later import updates it\n"), first.stderr
    same = cli("--import-history", str(sessions))
    assert (same.returncode, same.stdout) == (0, "1 conversation: 1 already here, 0 new, 0 exchanges\n"), same.stderr
    session.says("utcoffset was read once at import; it is read per date now.").write(rollout)
    later = cli("--import-history", str(sessions), "--output", "json")
    assert later.returncode == 0, later.stderr
    result = later.json()["result"]
    assert (result["completed"], result["updated"], result["exchanges"], result["already_here"]) == (1, 1, 0, 0)
    found = cli("--query-vector-store", "utcoffset read per date", "--output", "json")
    hits = found.json()["result"]["results"]
    assert [h["metadata"]["assistant_response"] for h in hits if h["kind"] == "exchange"] == [
        "utcoffset was read once at import; it is read per date now.\n\n(used shell)"]
    assert stats(cli)["exchanges"] == 1
    again = cli("--import-history", str(sessions))
    assert (again.returncode, again.stdout) == (0, "1 conversation: 1 already here, 0 new, 0 exchanges\n")
