"""Issue 33, the project scope: every exchange records its project; a chat prefers its own
project's memories (a boost, not a filter), `--project` and `/project PATH` keep to one
project's exchanges, the wake block lists this project's threads first, and MCP's
memory_search takes a project.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from pathlib import Path

import pytest

from ocat.commands import run_command
from ocat.config.loading import load_settings
from ocat.memory import MemoryStore, ProjectScope, RetrievalLimits, belongs, project_of, retrieve
from ocat.operations.wake import build_wake
from ocat.records import Exchange
from ocat.chat.session import ChatSession
from ocat.operations.browse import Entry, Filters
from tests.support.agent_fixtures import ClaudeCodeSession, claude_path
from tests.support.cli import Cli


def repo(tmp_path: Path, name: str) -> Path:
    """A folder that is a git work tree (a `.git` folder is what marks one), with a subfolder."""
    root = tmp_path / name
    (root / ".git").mkdir(parents=True)
    (root / "src" / "deep").mkdir(parents=True)
    return root


def test_a_project_is_the_git_root_else_the_folder_itself(tmp_path: Path) -> None:
    root = repo(tmp_path, "ferry")
    assert project_of(root / "src" / "deep") == str(root.resolve())
    plain = tmp_path / "notes"
    plain.mkdir()
    assert project_of(plain) == str(plain.resolve())
    assert project_of(tmp_path / "gone" / "away") == str((tmp_path / "gone" / "away").resolve())
    assert project_of("~") == str(Path.home().resolve())


def test_the_boost_is_scaled_by_the_share_outside_the_project() -> None:
    scope = ProjectScope("/p", "prefer", boost=0.4)
    assert scope.lift(["a", "b", "c", "d"], {"a": "/p", "b": "/q", "c": ""}) == ({"a"}, pytest.approx(0.3))
    assert scope.lift(["a", "b"], {"a": "/p", "b": "/p"}) == ({"a", "b"}, 0.0)  # all inside: nothing moves
    assert scope.lift(["a"], {"a": "/q"}) == (set(), 0.0)
    assert ProjectScope("/p", "only").where() == {"project": "/p"} and ProjectScope("/p").where() is None


def _two_projects(store: MemoryStore) -> tuple[Exchange, Exchange, Exchange]:
    """The same question answered in two projects, and a global fact (no project)."""
    ferry = Exchange("how do we deploy the service?", "ferry deploys with make ship", "t1", "s", project="/src/ferry")
    train = Exchange("how do we deploy the service?", "train deploys with helm upgrade", "t2", "s",
                     project="/src/train")
    food = Exchange("what do I eat?", "you are vegetarian", "t3", "s")
    store.add_exchanges([ferry, train, food])
    return ferry, train, food


def test_a_chat_prefers_its_project_and_only_keeps_to_one(store: MemoryStore) -> None:
    ferry, train, food = _two_projects(store)
    limits = RetrievalLimits.from_settings(load_settings(env={}).vector_store)

    def ids(scope: ProjectScope, query: str = "how do we deploy the service?") -> list[str]:
        hits = retrieve(store, query, RetrievalLimits(**{**limits.__dict__, "project": scope}))
        return [h.id for h in hits if h.kind == "exchange"]

    assert ids(ProjectScope("/src/train", "prefer", boost=0.5))[0] == train.exchange_id
    assert ids(ProjectScope("/src/ferry", "prefer", boost=0.5))[0] == ferry.exchange_id
    only = ids(ProjectScope("/src/ferry", "only"))
    assert ferry.exchange_id in only and train.exchange_id not in only and food.exchange_id not in only
    # Preferring a project is no filter: another project's memory and a global one still come.
    assert food.exchange_id in ids(ProjectScope("/src/ferry", "prefer", boost=0.5), "what do I eat?")
    assert train.exchange_id in ids(ProjectScope("/src/ferry", "prefer", boost=0.5))


def test_a_chat_records_its_project_and_project_changes_its_scope(
    store: MemoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = repo(tmp_path, "ferry")
    monkeypatch.chdir(root / "src")
    session = ChatSession(load_settings(env={}), store=store)
    exchange = session.record("where is the timetable?", "in data/", []).exchange
    assert store.get(exchange.exchange_id).project == str(root.resolve())  # type: ignore[union-attr]
    assert session.scope() == ProjectScope(str(root.resolve()), "prefer")
    said = run_command(session, "/project").text
    assert "ferry" in said and "those of" in said and "first" in said
    other = repo(tmp_path, "train")
    run_command(session, f"/project {other / 'src'}")
    assert session.scope() == ProjectScope(str(other.resolve()), "only")
    run_command(session, "/project all")
    assert session.scope().policy == "off" and not session.scope().preferring
    run_command(session, "/project auto")
    assert session.scope() == ProjectScope(str(root.resolve()), "prefer")


def test_the_wake_block_lists_this_projects_threads_first(store: MemoryStore) -> None:
    store.add_exchanges([
        Exchange("ferry timetable parser", "done", "t-ferry", "s", timestamp=1000.0, project="/src/ferry"),
        Exchange("train seat map", "done", "t-train", "s", timestamp=2000.0, project="/src/train"),
        Exchange("dinner ideas", "soup", "t-home", "s", timestamp=3000.0),
    ])
    settings = load_settings(env={})
    plain = build_wake(settings, store).threads
    ferry_first = build_wake(settings, store, project="/src/ferry").threads
    assert "dinner" in plain[0] and "ferry" in ferry_first[0]
    assert len(plain) == len(ferry_first) == 3


def test_mcp_search_keeps_to_a_project(store: MemoryStore, tmp_path: Path) -> None:
    from ocat.mcp_server.tools import MemoryTools

    ferry, train, food = _two_projects(store)
    tools = MemoryTools(load_settings(env={}), lambda: [store])
    found = tools.search("how do we deploy the service?", 5, project="/src/train")
    assert [r["id"] for r in found["results"] if r["kind"] == "exchange"] == [train.exchange_id]


@pytest.mark.slow
def test_query_and_ask_keep_to_the_project_given(cli: Cli, tmp_path: Path) -> None:
    lines = [
        {"kind": "exchange", "exchange_id": "e-ferry", "thread_id": "t1", "session_id": "s",
         "user_prompt": "how do we deploy?", "assistant_response": "ferry ships with make ship",
         "timestamp": 1700000000.0, "prior_exchange_ids": [], "thread_continuation_seq": 0,
         "thread_session_id": "t1_s", "project": "/src/ferry"},
        {"kind": "exchange", "exchange_id": "e-train", "thread_id": "t2", "session_id": "s",
         "user_prompt": "how do we deploy?", "assistant_response": "train ships with helm upgrade",
         "timestamp": 1700000100.0, "prior_exchange_ids": [], "thread_continuation_seq": 0,
         "thread_session_id": "t2_s", "project": "/src/train"},
    ]
    export = tmp_path / "memory.jsonl"
    export.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert cli("--import-memory", str(export)).returncode == 0
    found = cli("--query-vector-store", "how do we deploy?", "--project", "/src/train", "--output", "json")
    assert found.returncode == 0, found.stderr
    ids = [r["id"] for r in found.json()["result"]["results"]]
    assert ids == ["e-train"]
    where = cli("--query-vector-store", "how do we deploy?", "--where", "project=/src/ferry", "--output", "json")
    assert [r["id"] for r in where.json()["result"]["results"]] == ["e-ferry"]
    bad = cli("--add-to-vector-store", os.fspath(export), "--project", "/src/train")
    assert bad.returncode == 2 and "--project applies to" in bad.stderr


def git_repo(tmp_path: Path, *, real: bool = False) -> tuple[Path, Path, Path]:
    """A git work tree with a subfolder, and a link to it from elsewhere; `real`: made by `git
    init` (a process), else marked by its `.git` folder alone (what ocat looks for)."""
    root = tmp_path / "ferry"
    (root / "src" / "api").mkdir(parents=True)
    if real:
        subprocess.run(["git", "init", "-q", str(root)], check=True, capture_output=True)
    else:
        (root / ".git").mkdir()
    link = tmp_path / "ferry-link"
    link.symlink_to(root, target_is_directory=True)
    return root, root / "src" / "api", link


def test_one_rule_matches_a_stored_folder_to_a_project_wherever_it_is_asked(store: MemoryStore, tmp_path: Path) -> None:
    """Issue 44 (B14): a session run in a subfolder or through a link recorded that folder, and
    the project scope compared it with the git root exactly: no `--project`, `/project`, chat
    preference, wake block or browser filter found it."""
    root, sub, link = git_repo(tmp_path)
    project = project_of(root)
    gone = root / "src" / "old"  # removed since the session ran in it: matched by its path
    elsewhere = tmp_path / "train"
    elsewhere.mkdir()
    assert [belongs(str(f), project) for f in (root, sub, link, link / "src", gone, elsewhere)] == [
        True, True, True, True, True, False]
    assert not belongs(str(tmp_path / "ferry-other" / "x"), project)  # a prefix of names, not of characters
    assert belongs(str(tmp_path / "old" / "sub"), str(tmp_path / "old"))  # a project gone, its folder too
    in_sub = Exchange("how do we deploy the ferry api?", "make ship", "t1", "s", project=str(sub))
    by_link = Exchange("how do we deploy the ferry site?", "with rsync", "t2", "s", project=str(link))
    other = Exchange("how do we deploy the trains?", "with helm upgrade", "t3", "s", project=str(elsewhere),
                     timestamp=in_sub.timestamp + 10)
    store.add_exchanges([in_sub, by_link, other])
    limits = RetrievalLimits.from_settings(load_settings(env={}).vector_store)

    def ids(scope: ProjectScope) -> list[str]:
        hits = retrieve(store, "how do we deploy?", dataclasses.replace(limits, project=scope))
        return [h.id for h in hits if h.kind == "exchange"]

    assert sorted(ids(ProjectScope(project, "only"))) == sorted([in_sub.exchange_id, by_link.exchange_id])
    assert ids(ProjectScope(project, "prefer", boost=0.5))[-1] == other.exchange_id
    assert "trains" in build_wake(load_settings(env={}), store).threads[0]
    assert "ferry" in build_wake(load_settings(env={}), store, project=project).threads[0]
    here = Filters(project="this project", here=project)
    assert here.keeps(Entry("thread", "t1", "x", None, "chat", project=str(sub)))
    assert not here.keeps(Entry("thread", "t3", "x", None, "chat", project=str(elsewhere)))


def test_project_refuses_a_missing_folder_or_a_file(store: MemoryStore, tmp_path: Path) -> None:
    """Issue 44 (B14): `/project PATH` took a typo or a file silently, and every search then kept
    to a project that holds nothing."""
    session = ChatSession(load_settings(env={}), store=store)
    before = session.scope()
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    for path, said in ((tmp_path / "nope", "does not exist"), (a_file, "is a file, not a folder")):
        result = run_command(session, f"/project {path}")
        assert result.error and said in result.text and "the project is unchanged" in result.text
        assert session.scope() == before


@pytest.mark.slow
def test_project_finds_sessions_run_in_a_subfolder_or_through_a_link(cli: Cli, tmp_path: Path) -> None:
    """Issue 44 (B14), as a user runs it: Claude Code sessions in a subfolder of a git repository
    and through a link to it, found by `--project` given the root, the subfolder, `.` or the link."""
    root, sub, link = git_repo(tmp_path, real=True)
    elsewhere = tmp_path / "train"
    elsewhere.mkdir()
    projects = tmp_path / "projects"
    for number, (cwd, answer) in enumerate([(sub, "ferry api ships with make ship"),
                                             (link, "ferry site ships with rsync"),
                                             (elsewhere, "train deploys with helm upgrade")]):
        session_id = f"s{number}"
        ClaudeCodeSession(session_id, cwd=str(cwd)).prompt("how do we deploy the service?").says(answer).write(
            claude_path(projects, session_id, str(cwd)))
    imported = cli("--import-history", str(projects))
    assert imported.returncode == 0, imported.stderr
    in_sub = dataclasses.replace(cli, home=sub)  # run from inside the subfolder, for `.`
    for given, runner in ((str(root), cli), (str(sub), cli), (".", in_sub), (str(link), cli)):
        found = runner("--query-vector-store", "how do we deploy the service?", "--project", given,
                       "--results", "10", "--output", "json")
        assert (found.returncode, found.stderr) == (0, ""), given
        folders = sorted(hit["metadata"]["project"] for hit in found.json()["result"]["results"])
        assert folders == sorted([str(sub), str(link)]), given
