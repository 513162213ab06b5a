"""Issue 46 (3, 5): each MCP server's tool list is kept in ocat's cache, so `--ask` offers the tools
without starting a server, and starts one only when the model calls its tool; a stale list is a
tool error to the model; `--allow-tool` is checked against the tools that exist.

The servers are the SDK fixture (tests/support/mcp_fixture_server.py), which appends its pid to
$FIXTURE_STARTS_FILE each time it starts; the model is the fake OpenAI-compatible server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ocat.errors import UsageError
from ocat.mcp_client.allow_check import check_allowed_tools
from ocat.config.mcp_servers import parse_servers
from ocat.mcp_client.servers import ServerTool
from ocat.mcp_client.tool_cache import ToolCache, cache_file, entry_key
from tests.support.cli import Cli
from tests.support.fakes import FakeLLMServer
from tests.unit.test_mcp_client import ask_args, calls_made, fixture_entry, tool_messages, write_config


def counted_entry(folder: Path, **extra: Any) -> dict[str, Any]:
    """The fixture's entry, writing each start's pid to `folder/starts`."""
    entry = fixture_entry(folder, **extra)
    entry["env"] = {**entry["env"], "FIXTURE_STARTS_FILE": str(folder / "starts"), **extra.get("env", {})}
    return entry


def starts(folder: Path) -> int:
    """How many times the fixture server was started."""
    path = folder / "starts"
    return len(path.read_text().split()) if path.exists() else 0


def keep(name: str, entry: dict[str, Any], *tools: str) -> None:
    """Put `tools` (each read-only) in the cache as the server's list for `entry`."""
    config = parse_servers({name: entry}, "test", Path.cwd())[0]
    listed = tuple(ServerTool(name, tool, f"{name}__{tool}", f"the tool {tool}", {"type": "object", "properties": {}},
                              True) for tool in tools)
    ToolCache().store(config, listed)


def cached_names(name: str, entry: dict[str, Any]) -> list[str] | None:
    """The tool names the cache file holds for `entry` (read afresh from the file)."""
    config = parse_servers({name: entry}, "test", Path.cwd())[0]
    tools = ToolCache().tools(config)
    return None if tools is None else [tool.name for tool in tools]


def offered(llm_server: FakeLLMServer) -> set[str]:
    return {tool["function"]["name"] for tool in llm_server.requests[0].get("tools", [])}


# -- the cache itself ----------------------------------------------------------------------------


def test_the_key_is_the_entry_and_a_damaged_file_is_ignored_then_rewritten(isolated_home: Path) -> None:
    entry = {"command": "srv", "args": ["--a"], "env": {"TOKEN": "s3cret"}}
    config = parse_servers({"fx": entry}, "test", Path.cwd())[0]
    changed = parse_servers({"fx": {**entry, "env": {"TOKEN": "other"}}}, "test", Path.cwd())[0]
    assert entry_key(config) != entry_key(changed)
    cache_file().parent.mkdir(parents=True, exist_ok=True)
    cache_file().write_text("{not json")
    assert ToolCache().tools(config) is None  # damaged: as if never listed, no error
    keep("fx", entry, "lookup")
    assert cached_names("fx", entry) == ["lookup"] and ToolCache().tools(changed) is None
    assert "s3cret" not in cache_file().read_text()  # digests, never the env's values
    assert [p.name for p in cache_file().parent.iterdir() if p.name.startswith(".mcp-tools-")] == []


def test_allow_tool_names_are_checked_against_the_known_lists() -> None:
    known = {"fx": ("lookup", "write_note"), "new": None}
    assert check_allowed_tools(["fx.lookup"], known) == []
    assert "not known yet" in check_allowed_tools(["new.anything"], known)[0]
    with pytest.raises(UsageError, match=r"no MCP server named 'nosuch'.*fx\.lookup, fx\.write_note"):
        check_allowed_tools(["nosuch.tool"], known)
    with pytest.raises(UsageError, match=r"fx has no tool 'nope'"):
        check_allowed_tools(["fx.nope"], known)


# -- --ask ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_ask_offers_cached_tools_and_starts_no_server(cli: Cli, llm_server: FakeLLMServer, tmp_path: Path) -> None:
    entry = counted_entry(tmp_path)
    config = write_config(cli, {"fx": entry})
    llm_server.script = ["First answer."]
    first = cli("--ask", "hello", *ask_args(llm_server, config))
    assert first.returncode == 0, first.stderr
    assert starts(tmp_path) == 1 and "lookup" in (cached_names("fx", entry) or [])  # never seen: started to learn
    llm_server.script = ["Second answer."]
    second = cli("--ask", "hello again", *ask_args(llm_server, config))
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "Second answer."
    assert starts(tmp_path) == 1  # from the cache: no process started
    assert "fx__lookup" in {tool["function"]["name"] for tool in llm_server.requests[-1]["tools"]}


@pytest.mark.slow
def test_calling_a_cached_tool_starts_its_server_and_is_answered(
    cli: Cli, llm_server: FakeLLMServer, tmp_path: Path
) -> None:
    entry = counted_entry(tmp_path, allow="read-only")
    keep("fx", entry, "lookup")
    config = write_config(cli, {"fx": entry})
    llm_server.script = [[{"name": "fx__lookup", "arguments": {"word": "cat"}}], "Looked up."]
    run = cli("--ask", "look up cat", *ask_args(llm_server, config))
    assert run.returncode == 0, run.stderr
    assert offered(llm_server) == {"fx__lookup"}  # the cached list was offered
    assert starts(tmp_path) == 1 and [c["tool"] for c in calls_made(tmp_path)] == ["lookup"]
    assert "definition 42" in tool_messages(llm_server)[0]["content"]
    assert "write_note" in (cached_names("fx", entry) or [])  # the server's own list replaced the cached one


@pytest.mark.slow
def test_a_stale_cached_tool_is_a_tool_error_and_the_cache_is_refreshed(
    cli: Cli, llm_server: FakeLLMServer, tmp_path: Path
) -> None:
    entry = counted_entry(tmp_path, allow="read-only")
    keep("fx", entry, "lookup", "vanished")
    config = write_config(cli, {"fx": entry})
    llm_server.script = [[{"name": "fx__vanished", "arguments": {}}], "It is gone."]
    run = cli("--ask", "use it", *ask_args(llm_server, config))
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "It is gone."  # the turn ended normally
    assert "no longer a tool of fx" in tool_messages(llm_server)[0]["content"]
    names = cached_names("fx", entry) or []
    assert "vanished" not in names and "lookup" in names
    assert calls_made(tmp_path) == []


@pytest.mark.slow
def test_a_changed_entry_is_not_served_from_the_old_cache(cli: Cli, llm_server: FakeLLMServer, tmp_path: Path) -> None:
    old = counted_entry(tmp_path, env={"FIXTURE_FLAVOUR": "old"})
    keep("fx", old, "lookup", "vanished")
    config = write_config(cli, {"fx": counted_entry(tmp_path, env={"FIXTURE_FLAVOUR": "new"})})
    llm_server.script = ["Answer."]
    run = cli("--ask", "hello", *ask_args(llm_server, config))
    assert run.returncode == 0, run.stderr
    assert starts(tmp_path) == 1  # a new key: started to learn its tools
    assert "fx__vanished" not in offered(llm_server) and "fx__write_note" in offered(llm_server)


@pytest.mark.slow
def test_tools_list_changed_refreshes_the_cache(cli: Cli, llm_server: FakeLLMServer, tmp_path: Path) -> None:
    entry = counted_entry(tmp_path, allow="read-only", env={"FIXTURE_GROWS": "1"})
    config = write_config(cli, {"fx": entry})
    llm_server.script = [[{"name": "fx__grow", "arguments": {}}], [{"name": "fx__lookup", "arguments": {"word": "a"}}],
                         "Grown."]
    run = cli("--ask", "grow", *ask_args(llm_server, config))
    assert run.returncode == 0, run.stderr
    assert tool_messages(llm_server)[0]["content"] == "the list has grown"
    # the second call gave the client time to read the list again after the notification
    assert "grown" in (cached_names("fx", entry) or [])


@pytest.mark.slow
def test_allow_tool_is_refused_unless_a_server_has_the_tool(cli: Cli, llm_server: FakeLLMServer, tmp_path: Path) -> None:
    entry = counted_entry(tmp_path)
    keep("fx", entry, "lookup", "write_note")
    config = write_config(cli, {"fx": entry})
    bad = cli("--ask", "x", *ask_args(llm_server, config, "--allow-tool", "nosuch.tool"))
    assert bad.returncode == 2
    assert "nosuch.tool" in bad.stderr and "fx.lookup, fx.write_note" in bad.stderr
    assert llm_server.requests == [] and starts(tmp_path) == 0
    llm_server.script = [[{"name": "fx__write_note", "arguments": {"text": "milk"}}], "Written."]
    good = cli("--ask", "note", *ask_args(llm_server, config, "--allow-tool", "fx.write_note"))
    assert good.returncode == 0, good.stderr
    assert (tmp_path / "note.txt").read_text() == "milk\n"
    chat = cli("--plain", *ask_args(llm_server, config, "--allow-tool", "fx.nope"), input="/quit\n")
    assert chat.returncode == 2 and "fx has no tool 'nope'" in chat.stderr


def test_the_cache_file_is_json_with_a_version(isolated_home: Path) -> None:
    keep("fx", {"command": "srv"}, "lookup")
    data = json.loads(cache_file().read_text())
    assert data["version"] == 1 and [kept["server"] for kept in data["servers"].values()] == ["fx"]
