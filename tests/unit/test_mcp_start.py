"""Issue 46: MCP servers as people really run them, through launchers (npx, uvx) that download
on first use and forward no signal.

A server slow to start is never stopped for it: `start_timeout` is how long a turn waits, and its
tools come on a later turn; servers start side by side, each on its own, so a fast one's tools
are offered on the first turn whatever a slow one does; `--list-tools` waits for every server,
with a progress line; and on every way out (Ctrl+Q, `/quit`, SIGTERM, mid-call) the launcher's
child is gone afterwards. The slow server is tests/support/mcp_fixture_server.py with
$FIXTURE_START_DELAY (or held until a file appears: $FIXTURE_START_HELD), run as the child of
tests/support/mcp_launcher.py. Every wait is bounded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ocat.config.mcp_servers import parse_servers
from ocat.mcp_client.server_processes import running
from ocat.mcp_client.servers import McpServers
from tests.support.paths import SUPPORT
from tests.support.cli import Cli
from tests.support.fakes import FakeLLMServer
from tests.unit.test_mcp_client import ask_args, calls_made, fixture_entry, write_config
from tests.unit.test_mcp_descendants import _read_for, cleanup, ended_draining, full_screen_chat, gone, started_pids

LAUNCHER = SUPPORT / "mcp_launcher.py"
# How long the slow server takes to answer its initialize: well past its start_timeout (1 s), and
# past the 5 s after which `--list-tools` says what it waits for.
DELAY = 6


def launched_entry(folder: Path, delay: float = 0, held: Path | None = None, **extra: Any) -> dict[str, Any]:
    """The fixture server as the child of the launcher (pids in folder/pids), slow by `delay` s,
    or until the file `held` exists. A new interpreter, the launcher's own child, as an npx's is."""
    entry = fixture_entry(folder, cold=True, **extra)
    entry["env"] = {**entry["env"], "FIXTURE_START_DELAY": str(delay)} if delay else entry["env"]
    entry["env"] = {**entry["env"], "FIXTURE_START_HELD": str(held)} if held else entry["env"]
    entry["args"] = [str(LAUNCHER), str(folder / "pids"), "--", sys.executable, *entry["args"]]
    return entry


def wait_until(check: Any, seconds: float = 60) -> bool:
    deadline = time.monotonic() + seconds
    while not check() and time.monotonic() < deadline:
        time.sleep(0.1)
    return bool(check())


@pytest.mark.slow
def test_a_slow_starter_is_not_stopped_and_a_fast_one_beside_it_is_ready_at_once(tmp_path: Path) -> None:
    slow_dir, fast_dir = tmp_path / "slow", tmp_path / "fast"
    slow_dir.mkdir(), fast_dir.mkdir()
    go = tmp_path / "go"  # the slow server answers its initialize once this file is there
    configs = parse_servers({"slow": launched_entry(slow_dir, held=go, start_timeout=1),
                             "fast": fixture_entry(fast_dir, start_timeout=30)}, "test", tmp_path)
    servers = McpServers(configs, tmp_path / "logs")
    pids: list[int] = []
    try:
        servers.wait()  # what a turn does: each server waited for up to its start_timeout
        states = {s.name: s.state for s in servers.statuses()}
        assert states == {"slow": "starting", "fast": "ready"}
        assert {tool.server for tool in servers.tools()} == {"fast"}  # the first turn's tools
        pids = started_pids(slow_dir)
        # Still held at twice its start_timeout: nothing stopped it meanwhile.
        assert servers.wait_for("slow", 1).state == "starting" and all(running(pid) for pid in pids)
        go.touch()
        status = servers.wait_for("slow", 60)  # it goes on starting: nothing stopped it
        assert status.state == "ready" and status.error is None and status.tools
        assert {tool.server for tool in servers.tools()} == {"slow", "fast"}  # a later turn's
        servers.call("slow", "lookup", {"word": "cat"}, restarted=set())
        assert [call["pid"] for call in calls_made(slow_dir)] == [pids[1]]  # the same child, never restarted
        servers.start(["slow"])  # started already: nothing happens
        assert servers.wait_for("slow", 0).state == "ready"
        assert started_pids(slow_dir) == pids
    finally:
        servers.close()
        cleanup(pids)
    assert gone(pids)


@pytest.mark.slow
def test_closing_ends_a_server_still_starting_and_its_launchers_child(tmp_path: Path) -> None:
    configs = parse_servers({"slow": launched_entry(tmp_path, 60, start_timeout=1)}, "test", tmp_path)
    servers = McpServers(configs, tmp_path / "logs")
    pids: list[int] = []
    try:
        servers.start()
        pids = started_pids(tmp_path)
        assert servers.wait_for("slow", 0.5).state == "starting"
        servers.close()
        assert gone(pids)
    finally:
        servers.close()
        cleanup(pids)


@pytest.mark.slow
def test_the_first_turn_offers_the_fast_servers_tools_and_says_the_slow_one_is_starting(
    cli: Cli, llm_server: FakeLLMServer, tmp_path: Path
) -> None:
    slow_dir, fast_dir = tmp_path / "slow", tmp_path / "fast"
    slow_dir.mkdir(), fast_dir.mkdir()
    config = write_config(cli, {"slow": launched_entry(slow_dir, 60, start_timeout=1),
                                "fast": fixture_entry(fast_dir, start_timeout=30)})
    run = cli("--ask", "hi", *ask_args(llm_server, config))
    pids = started_pids(slow_dir)
    try:
        assert run.returncode == 0, run.stderr
        offered = {t["function"]["name"].split("__")[0] for t in llm_server.requests[0]["tools"]}
        assert "fast" in offered and "slow" not in offered
        assert run.stderr.count("slow: still starting; its tools come when it is ready") == 1, run.stderr
        assert "did not start" not in run.stderr and "is off" not in run.stderr
        assert gone(pids)
    finally:
        cleanup(pids)


@pytest.mark.slow
def test_list_tools_waits_for_a_slow_server_with_a_progress_line_and_lists_it(cli: Cli, tmp_path: Path) -> None:
    config = write_config(cli, {"slow": launched_entry(tmp_path, DELAY, start_timeout=1)})
    run = cli("--list-tools", "--config", str(config), "--output", "json")
    pids = started_pids(tmp_path)
    try:
        assert run.returncode == 0, run.stderr
        assert "waiting for MCP server slow to start" in run.stderr
        (server,) = json.loads(run.stdout)["result"]["servers"]
        assert server["state"] == "ready" and "lookup" in {tool["name"] for tool in server["tools"]}
        assert gone(pids)
    finally:
        cleanup(pids)


def _hanging(llm_server: FakeLLMServer, cli: Cli, tmp_path: Path) -> Path:
    """A config whose server (behind the launcher) is asked for its tool that never answers."""
    llm_server.script = [[{"name": "slow__hang", "arguments": {}}], "Done."]
    return write_config(cli, {"slow": launched_entry(tmp_path, allow="read-only", timeout=120, start_timeout=60)})


def _in_the_call(tmp_path: Path) -> bool:
    return wait_until(lambda: any(call["tool"] == "hang" for call in calls_made(tmp_path)))


@pytest.mark.slow
def test_sigterm_mid_call_leaves_no_launchers_child(cli: Cli, llm_server: FakeLLMServer, tmp_path: Path) -> None:
    config = _hanging(llm_server, cli, tmp_path)
    ask = subprocess.Popen([sys.executable, "-m", "ocat", "--ask", "go", *ask_args(llm_server, config)],
                           env=cli.environ(), cwd=cli.home, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    pids: list[int] = []
    try:
        pids = started_pids(tmp_path)
        assert _in_the_call(tmp_path)
        ask.send_signal(signal.SIGTERM)
        ask.wait(60)
        assert gone(pids)
    finally:
        if ask.poll() is None:
            ask.kill()
            ask.wait(10)
        cleanup(pids)


@pytest.mark.slow
@pytest.mark.parametrize("way", ["ctrl+q", "/quit"])
def test_leaving_the_full_screen_chat_mid_call_leaves_no_launchers_child(
    cli: Cli, llm_server: FakeLLMServer, tmp_path: Path, way: str
) -> None:
    config = _hanging(llm_server, cli, tmp_path)
    chat, controller = full_screen_chat(cli, ask_args(llm_server, config))
    pids: list[int] = []
    try:
        pids = started_pids(tmp_path)
        _read_for(controller, 1.0)
        os.write(controller, b"go\r")
        deadline = time.monotonic() + 60
        while not any(call["tool"] == "hang" for call in calls_made(tmp_path)) and time.monotonic() < deadline:
            _read_for(controller, 0.2)
        assert any(call["tool"] == "hang" for call in calls_made(tmp_path)), "the call never started"
        if way == "/quit":  # a command waits for the turn: Esc gives the call up first, as a user does
            os.write(controller, b"\x1b")
            _read_for(controller, 1.0)
        os.write(controller, b"\x11" if way == "ctrl+q" else b"/quit\r")
        assert ended_draining(chat, controller), f"the chat did not quit on {way}"
        assert gone(pids), [(pid, os.path.exists(f"/proc/{pid}")) for pid in pids]
    finally:
        if chat.poll() is None:
            chat.kill()
            chat.wait(10)
        os.close(controller)
        cleanup(pids)
