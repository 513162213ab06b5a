"""Issue 31: the chat uses the user's MCP servers, with consent for every call.

The servers here are real stdio servers written with the SDK (tests/support/mcp_fixture_server.py:
a read-only tool, one that writes a file, one that hangs, one that crashes, ...) and ocat's own
`ocat mcp`; the model is a fake OpenAI-compatible server scripted to call them.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from ocat.errors import ConfigError
from ocat.config.mcp_servers import Allow, McpServerConfig, parse_servers, read_servers_file
from ocat.mcp_client.consent import DENIED, Answer, Consent, ConsentRequest, always_allowed, take_back
from ocat.mcp_client.servers import McpServers, qualified_name, result_text
from ocat.tools.calls import result_gist
from tests.support.paths import SUPPORT
from tests.support.cli import Cli
from tests.support.fakes import FakeLLMServer
from tests.support.warm_start import python_command, startup_environ

FIXTURE = SUPPORT / "mcp_fixture_server.py"


def fixture_entry(folder: Path, *, cold: bool = False, **extra: Any) -> dict[str, Any]:
    """The fixture server as a config entry; its note and call log live in `folder`, and `env`
    adds to its environment. It is forked from the test worker's warm server, which has the SDK
    imported (tests/support/warm_start.py: ~1 s less a start); `cold` starts a new interpreter
    instead, ocat's own child, for a test that looks for the server's process right after ocat
    ended it (a warm run is the warm server's, and goes a moment after its launcher is killed)."""
    env = {**startup_environ(), "FIXTURE_NOTE_FILE": str(folder / "note.txt"),
           "FIXTURE_CALLS_FILE": str(folder / "calls.jsonl"), **extra.pop("env", {})}
    command = [sys.executable, str(FIXTURE)] if cold else python_command(str(FIXTURE), env=env)
    return {"command": command[0], "args": command[1:], "env": env, "timeout": 5, "start_timeout": 30, **extra}


def calls_made(folder: Path) -> list[dict[str, Any]]:
    """What reached the fixture server, one record per call."""
    path = folder / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def pid_alive(pid: int) -> bool:
    """Whether a process is there and not a zombie waiting to be reaped."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def write_config(cli: Cli, servers: dict[str, Any]) -> Path:
    """A config file naming `servers` under mcp_servers (JSON is YAML)."""
    path = cli.home / "mcp-config.yaml"
    path.write_text(json.dumps({"mcp_servers": servers}))
    return path


def ask_args(server: FakeLLMServer, config: Path, *more: str) -> list[str]:
    return ["--config", str(config), "--no-vector-store", "--model", "openai/fake-model",
            "--set", f"llm.api_base={server.api_base}", "--set", "llm.api_key=sk-test", "--set", "tools.enabled=on",
            *more]


def tool_messages(server: FakeLLMServer) -> list[dict[str, Any]]:
    """The tool results the model was sent in its last request (which holds the turn's so far)."""
    return [m for m in server.requests[-1].get("messages", []) if m.get("role") == "tool"]


# -- the config ---------------------------------------------------------------------------------------


def test_entries_in_claude_desktops_shape_are_read_and_checked(tmp_path: Path) -> None:
    servers = parse_servers({
        "files": {"command": "npx", "args": ["-y", "server-filesystem", "~/notes"], "env": {"TOKEN": 12345678},
                  "allow": "read-only", "cwd": "work"},
        "remote": {"url": "https://example.org/mcp", "allow": ["search"], "timeout": 5},
        "off": {"command": "x", "disabled": True},
    }, "config.yaml", tmp_path)
    files, remote = servers
    assert files.args[-1] == str(Path.home() / "notes") and files.env == {"TOKEN": "12345678"}
    assert files.allows_read_only and files.cwd == str(tmp_path / "work") and files.timeout == 60
    assert remote.url == "https://example.org/mcp" and remote.allow == Allow(names=frozenset({"search"})) and remote.timeout == 5
    assert "12345678" not in repr(files)  # env may hold secrets


@pytest.mark.parametrize(("entry", "says"), [
    ({"comand": "npx"}, "unknown key 'comand'"),
    ({"command": "npx", "url": "https://x"}, "either command"),
    ({}, "either command"),
    ({"url": "ftp://x"}, "http:// or https://"),
    ({"command": "x", "args": "one"}, "args must be a list"),
    ({"command": "x", "allow": "everything"}, "allow must be a list"),
    ({"command": "x", "timeout": 0}, "timeout must be a number"),
])
def test_a_bad_entry_names_the_server_and_the_key(tmp_path: Path, entry: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=r"mcp server 'fx'") as raised:
        parse_servers({"fx": entry}, "config.yaml", tmp_path)
    assert says in str(raised.value)


def test_the_config_file_and_a_claude_desktop_file_are_merged(cli: Cli, tmp_path: Path) -> None:
    desktop = tmp_path / "claude_desktop_config.json"
    desktop.write_text(json.dumps({"mcpServers": {"files": {"command": "from-file"}, "web": {"command": "fetch"}}}))
    assert [s.name for s in read_servers_file(desktop)] == ["files", "web"]
    config = cli.home / "c.yaml"
    config.write_text(f"tools:\n  mcp_servers_file: {desktop}\nmcp_servers:\n  files:\n    command: mine\n")
    from ocat.config.loading import load_settings

    settings = load_settings(str(config))
    assert [(s.name, s.command) for s in settings.mcp_servers] == [("files", "mine"), ("web", "fetch")]
    config.write_text("mcp_servers:\n  bad name:\n    command: x\n")
    with pytest.raises(ConfigError, match="bad name"):
        load_settings(str(config))


def test_tool_names_carry_the_server_within_providers_limits() -> None:
    assert qualified_name("files", "read_file", set()) == "files__read_file"
    assert qualified_name("files", "read.file v2", set()) == "files__read_file_v2"
    long = qualified_name("s" * 40, "t" * 40, set())
    assert len(long) == 64
    assert qualified_name("s" * 40, "t" * 40, {long}) != long and len(qualified_name("s" * 40, "t" * 40, {long})) <= 64


# -- consent -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "gist"), [
    # mcp-server-time's answer, indented over lines: it was summed up as "{".
    (json.dumps({"timezone": "Europe/Paris", "datetime": "2026-11-27T13:30:00+01:00", "is_dst": False}, indent=2),
     "timezone: Europe/Paris, datetime: 2026-11-27T13:30:00+01:00, is_dst: false"),
    ('[\n  {"name": "a.txt", "size": 3},\n  {"name": "b.txt", "size": 9}\n]', "2 items: {name, size}"),
    ("[1, 2, 3]", "3 items: 1, 2, 3"),
    ('{"user": {"id": 1, "name": "x"}, "tags": ["a", "b"], "next": null}', "user: {id, name}, tags: [2 items], next: null"),
    ("{}", "(empty object)"), ("[]", "(empty list)"), ("  ", "(no content)"),
    ("{not json at all\nsecond", "{not json at all"), ("On branch main\nnothing to commit", "On branch main"),
    ('{"say": "\\u001b[31mred"}', "say: \\x1b[31mred"),  # escaped: a tool wrote it
])
def test_a_result_is_summed_up_as_a_person_would(text: str, gist: str) -> None:
    assert result_gist(text) == gist


def test_a_long_result_is_summed_up_in_one_line_of_the_width() -> None:
    said = result_gist(json.dumps({f"key{n}": "word " * 20 for n in range(10)}, indent=2), 60)
    assert len(said) == 60 and said.startswith("key0: word word") and said.endswith("…") and "\n" not in said


def test_consent_beforehand_for_one_command_always_and_asked(isolated_home: Path) -> None:
    consent = Consent({"fx": Allow(names=frozenset({"write_note"})), "ro": Allow(read_only=True)}, allowed_tools={"fx.paint"})
    assert consent.decide("fx", "write_note", {}, read_only=False)  # the config's allow list
    assert consent.decide("ro", "anything", {}, read_only=True)  # allow: read-only
    assert not consent.decide("ro", "delete", {}, read_only=False)  # not read-only, nobody to ask
    assert consent.decide("fx", "paint", {}, read_only=False)  # --allow-tool
    asked: list[ConsentRequest] = []
    answers = iter([Answer.NO, Answer.ONCE, Answer.ALWAYS])
    consent.ask = lambda request: (asked.append(request), next(answers))[1]
    assert not consent.decide("fx", "hang", {"a": 1}, read_only=False)
    assert consent.decide("fx", "hang", {"a": 1}, read_only=False)
    assert consent.decide("fx", "hang", {"a": 1}, read_only=False)  # always: kept
    assert len(asked) == 3 and "fx.hang" in always_allowed()
    assert consent.decide("fx", "hang", {}, read_only=False) and len(asked) == 3  # not asked again
    assert take_back("fx.hang") and not take_back("fx.hang") and "fx.hang" not in always_allowed()


@pytest.mark.parametrize(("allow", "tool", "read_only", "runs"), [
    ("read-only", "read-only", False, False),  # B16: a tool *named* read-only is not the keyword
    ("read-only", "lookup", True, True),
    ("read-only", "write_note", False, False),
    (["read-only"], "read-only", False, True),  # in a list, read-only is a tool's name...
    (["read-only"], "lookup", True, False),  # ...and never the keyword
    (["write_note"], "write_note", False, True),
])
def test_allow_read_only_is_a_keyword_and_a_list_holds_names(
    tmp_path: Path, isolated_home: Path, allow: Any, tool: str, read_only: bool, runs: bool
) -> None:
    (server,) = parse_servers({"fx": {"command": "x", "allow": allow}}, "config.yaml", tmp_path)
    consent = Consent({"fx": server.allow})
    assert (consent.reason("fx", tool, read_only) == "config") is runs
    assert consent.decide("fx", tool, {}, read_only=read_only) is runs  # nobody to ask: only config runs it


def test_a_damaged_consent_file_is_moved_aside_and_said_not_overwritten(isolated_home: Path) -> None:
    from ocat.config.locations import state_dir

    kept = state_dir() / "tool_consent.json"
    kept.parent.mkdir(parents=True, exist_ok=True)
    damaged = '{"always": ["fx.write_note", "web.fetch"'  # cut short: a full disk, a crash mid-edit
    kept.write_text(damaged, encoding="utf-8")
    consent = Consent({}, ask=lambda request: Answer.ALWAYS)
    assert consent.decide("fx", "hang", {}, read_only=False)
    (aside,) = kept.parent.glob("tool_consent.json.damaged-*")
    assert aside.read_text(encoding="utf-8") == damaged  # the user's earlier answers are all there
    assert always_allowed() == {"fx.hang"}  # the new answer is kept in a fresh file
    (said,) = consent.news()
    assert str(aside) in said and "moved aside" in said
    assert consent.news() == []  # said once
    kept.write_text('{"always": "fx.hang"}', encoding="utf-8")  # valid JSON, wrong shape: damaged too
    assert consent.reason("fx", "hang", read_only=False) is None
    assert len(list(kept.parent.glob("tool_consent.json.damaged-*"))) == 2 and not kept.exists()
    assert len(consent.news()) == 1


def test_the_question_shows_arguments_escaped() -> None:
    request = ConsentRequest("files", "read_file", {"path": "/tmp/\x1b[2Jx\u202e"})
    assert "\x1b" not in request.question() and "\u202e" not in request.question()
    assert request.question().startswith(
        'Allow files.read_file {"path": "/tmp/\\u001b[2Jx\\u202e"}? [y]es once, [a]lways, [n]o')
    assert Answer.from_letter(" A\n") is Answer.ALWAYS and Answer.from_letter("maybe") is None


# -- the servers, live ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_servers_start_answer_time_out_crash_and_restart_once_a_turn(tmp_path: Path) -> None:
    entry = fixture_entry(tmp_path, timeout=3, cold=True)  # its processes are looked for once closed
    config = parse_servers({"fx": entry}, "test", tmp_path)[0]
    servers = McpServers([config], tmp_path / "logs")
    try:
        servers.wait()
        status = servers.statuses()[0]
        assert status.state == "ready", status.error
        assert {"fx__lookup", "fx__write_note", "fx__hang"} <= {t.qualified for t in servers.tools()}
        assert next(t for t in servers.tools() if t.name == "lookup").read_only
        turn: set[str] = set()
        assert "definition 42" in result_text(servers.call("fx", "lookup", {"word": "cat"}, restarted=turn))
        assert result_text(servers.call("fx", "flood", {}, restarted=turn)) == "flooded and done"
        with pytest.raises(Exception, match="did not answer within 3 s"):
            servers.call("fx", "hang", {}, restarted=turn)
        failed = servers.call("fx", "fail", {}, restarted=turn)
        assert failed.is_error and "failed on purpose" in result_text(failed)
        with pytest.raises(Exception, match="stopped during the call"):
            servers.call("fx", "crash", {}, restarted=turn)
        first_pid = calls_made(tmp_path)[-1]["pid"]
        assert "definition 42" in result_text(servers.call("fx", "lookup", {"word": "dog"}, restarted=turn))
        assert calls_made(tmp_path)[-1]["pid"] != first_pid and turn == {"fx"}  # restarted, once
        with pytest.raises(Exception, match="stopped during the call"):
            servers.call("fx", "crash", {}, restarted=turn)
        with pytest.raises(Exception, match="crashed"):  # not twice in one turn
            servers.call("fx", "lookup", {"word": "eel"}, restarted=turn)
        pids = {call["pid"] for call in calls_made(tmp_path)}
    finally:
        servers.close()
    assert not any(pid_alive(pid) for pid in pids)


@pytest.mark.slow
def test_a_server_that_cannot_start_is_off_with_its_reason_and_a_slow_one_is_still_starting(tmp_path: Path) -> None:
    missing = McpServerConfig("gone", command=str(tmp_path / "no-such-program"), start_timeout=5)
    slow = parse_servers({"slow": fixture_entry(tmp_path, start_timeout=1,
                                                env={"FIXTURE_START_DELAY": "30"})}, "test", tmp_path)[0]
    servers = McpServers([missing, slow], tmp_path / "logs")
    try:
        servers.wait()
        states = {s.name: (s.state, s.error or "") for s in servers.statuses()}
    finally:
        servers.close()
    assert states["gone"][0] == "failed" and states["gone"][1]
    assert states["slow"] == ("starting", "")  # not stopped: issue 46 (tests/unit/test_mcp_start.py)
    assert servers.tools() == []


# -- headless: --ask, --list-tools ------------------------------------------------------------------------


@pytest.mark.slow
def test_ask_without_a_user_denies_a_tool_not_allowed_and_it_never_runs(
    cli: Cli, llm_server: FakeLLMServer, tmp_path: Path
) -> None:
    config = write_config(cli, {"fx": fixture_entry(tmp_path)})
    llm_server.script = [[{"name": "fx__write_note", "arguments": {"text": "pwned"}}], "I could not write it."]
    run = cli("--ask", "write a note", *ask_args(llm_server, config))
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "I could not write it."
    assert not (tmp_path / "note.txt").exists() and calls_made(tmp_path) == []  # it never reached the server
    assert any(DENIED in m["content"] for m in tool_messages(llm_server))
    assert "fx__write_note" in {t["function"]["name"] for t in llm_server.requests[0]["tools"]}


@pytest.mark.slow
def test_ask_with_allow_tool_runs_it_and_the_result_is_a_tool_message(
    cli: Cli, llm_server: FakeLLMServer, tmp_path: Path
) -> None:
    config = write_config(cli, {"fx": fixture_entry(tmp_path, cold=True)})  # looked for once ocat ends
    llm_server.script = [[{"name": "fx__write_note", "arguments": {"text": "buy milk"}}], "Written."]
    run = cli("--ask", "write a note", *ask_args(llm_server, config, "--allow-tool", "fx.write_note"))
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "note.txt").read_text() == "buy milk\n"
    results = tool_messages(llm_server)
    assert [m["content"] for m in results] == ["written"]
    assert all(m["role"] != "system" or "written" not in m["content"] for m in llm_server.requests[-1]["messages"])
    assert not any(pid_alive(call["pid"]) for call in calls_made(tmp_path))  # no child outlives ocat


@pytest.mark.slow
def test_results_are_cut_to_the_budget_and_reach_the_screen_escaped(
    cli: Cli, llm_server: FakeLLMServer, tmp_path: Path
) -> None:
    config = write_config(cli, {"fx": fixture_entry(tmp_path, allow="read-only")})
    llm_server.script = [[{"name": "fx__big", "arguments": {}}, {"name": "fx__paint", "arguments": {}}], "Seen."]
    run = cli("--plain", *ask_args(llm_server, config, "--set", "display.context_mode=on"),
              input="look\n/quit\n")
    assert run.returncode == 0, run.stderr
    big, paint = tool_messages(llm_server)
    assert "(cut to stay within 1500 tokens" in big["content"] and len(big["content"]) < 20_000
    assert paint["content"].startswith("\x1b[2J")  # the model reads the data as it came
    assert "\x1b" not in run.stderr and "\x1b" not in run.stdout and "\\x1b[31mred" in run.stderr


@pytest.mark.slow
def test_a_broken_server_costs_one_line_and_the_turn_goes_on(cli: Cli, llm_server: FakeLLMServer, tmp_path: Path) -> None:
    config = write_config(cli, {"gone": {"command": str(tmp_path / "no-such-program"), "start_timeout": 5},
                                "fx": fixture_entry(tmp_path, allow=["crash", "lookup"])})
    llm_server.script = [[{"name": "fx__crash", "arguments": {}}], [{"name": "fx__lookup", "arguments": {"word": "x"}}],
                         "Done."]
    run = cli("--ask", "go", *ask_args(llm_server, config))
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "Done."
    assert run.stderr.count("MCP server gone is off") == 1
    crashed, looked_up = tool_messages(llm_server)
    assert "stopped during the call" in crashed["content"] and "definition 42" in looked_up["content"]


@pytest.mark.slow
def test_list_tools_shows_servers_tools_and_what_may_run(cli: Cli, tmp_path: Path) -> None:
    config = write_config(cli, {"fx": fixture_entry(tmp_path, allow=["write_note"])})
    shown = cli("--list-tools", "--config", str(config), "--allow-tool", "fx.paint")
    assert shown.returncode == 2 and "--allow-tool applies to --ask and the chat only" in shown.stderr
    shown = cli("--list-tools", "--config", str(config))
    assert shown.returncode == 0, shown.stderr
    assert "fx: ready, 8 tools" in shown.stdout
    assert "fx.write_note: allowed (config)" in shown.stdout and "fx.hang: denied here (no one to ask)" in shown.stdout
    listed = cli("--list-tools", "--config", str(config), "--output", "json")
    server = listed.json()["result"]["servers"][0]
    assert server["state"] == "ready" and server["error"] is None
    lookup = next(t for t in server["tools"] if t["name"] == "lookup")
    assert lookup == {"name": "lookup", "offered_as": "fx__lookup", "read_only": True, "allowed": False,
                      "allowed_by": None, "description": "Look a word up in the fixture's dictionary."}
    bad = cli("--ask", "x", "--allow-tool", "fx")
    assert bad.returncode == 2 and "expected SERVER.TOOL" in bad.stderr


@pytest.mark.slow
def test_ocat_mcp_serving_another_store_is_a_server_too(cli: Cli, llm_server: FakeLLMServer, tmp_path: Path) -> None:
    other = tmp_path / "other-store"
    note = tmp_path / "fact.txt"
    note.write_text("The staging database password rotates every Tuesday.\n")
    added = cli("--add-to-vector-store", str(note), env={"OCAT_VECTOR_STORE_PATH": str(other)})
    assert added.returncode == 0, added.stderr
    env = {**startup_environ(), "OCAT_VECTOR_STORE_PATH": str(other),
           "OCAT_EMBEDDING_MODEL_PATH": os.environ["OCAT_EMBEDDING_MODEL_PATH"], "HOME": str(cli.home)}
    command = python_command("-m", "ocat", "mcp", env=env)  # from the warm server, as `Cli` runs ocat
    config = write_config(cli, {"team": {"command": command[0], "args": command[1:], "env": env,
                                         "allow": "read-only", "start_timeout": 60, "timeout": 60}})
    llm_server.script = [[{"name": "team__memory_search", "arguments": {"query": "when does the password rotate"}}],
                         "On Tuesdays."]
    run = cli("--ask", "when does the staging password rotate?", *ask_args(llm_server, config))
    assert run.returncode == 0, run.stderr
    assert "every Tuesday" in tool_messages(llm_server)[0]["content"]


@pytest.mark.slow
def test_a_schema_error_naming_a_server_tool_drops_only_that_tool(
    cli: Cli, llm_server: FakeLLMServer, tmp_path: Path
) -> None:
    """Issue 44, B10: OpenAI's 400 for one MCP tool's schema costs that tool, named, not every tool."""
    config = write_config(cli, {"fx": fixture_entry(tmp_path)})
    llm_server.refuse_tool = "fx__lookup"
    llm_server.reply = "Answered without it."
    run = cli("--ask", "look it up", *ask_args(llm_server, config))
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "Answered without it."
    assert "refused the tool fx__lookup (" in run.stderr and "does not take tools" not in run.stderr
    offered = [{t["function"]["name"] for t in r.get("tools", [])} for r in llm_server.requests]
    assert "fx__lookup" in offered[0] and "fx__lookup" not in offered[1] and "fx__write_note" in offered[1]
    assert not (cli.home / ".local/state/ocat/tools.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize("face", ["--ask", "--plain"])
def test_a_server_writing_garbage_to_stdout_costs_one_line(
    cli: Cli, llm_server: FakeLLMServer, tmp_path: Path, face: str
) -> None:
    """Issue 44: lines that are not JSON-RPC (a banner, babble mid-call) are one line per server
    on stderr, not pydantic's tracebacks; the details are in the log, and the calls still work."""
    config = write_config(cli, {"fx": fixture_entry(tmp_path, allow=["babble", "lookup"],
                                                    env={"FIXTURE_GARBAGE": "1",
                                                         "FIXTURE_CALLS_FILE": str(tmp_path / "calls.jsonl")})})
    llm_server.script = [[{"name": "fx__babble", "arguments": {}}], [{"name": "fx__lookup", "arguments": {"word": "x"}}],
                         "Done."]
    args = ask_args(llm_server, config)
    run = cli("--ask", "go", *args) if face == "--ask" else cli("--plain", *args, input="go\n/quit\n")
    assert run.returncode == 0, run.stderr
    assert "Done." in run.stdout
    assert "Traceback" not in run.stderr and "pydantic" not in run.stderr.lower(), run.stderr
    said = [line for line in run.stderr.splitlines() if "not JSON-RPC" in line]
    assert said == ["ocat: note: mcp server fx wrote something that is not JSON-RPC; ignored "
                    "(details in ~/.local/state/ocat/mcp/fx.log)"], run.stderr
    log = (cli.home / ".local/state/ocat/mcp/fx.log").read_text()
    assert "Starting the fixture server..." in log and "babble: not JSON-RPC" in log
    babbled, looked_up = tool_messages(llm_server)
    assert babbled["content"] == "babbled" and "definition 42" in looked_up["content"]
