"""Issue 44, B7: no descendant of an MCP server outlives ocat, whatever the server does.

The server here (tests/support/mcp_family_server.py) starts a child that sleeps, then serves;
on stdin EOF it exits (leaving its child, whose parent becomes init) or goes on running, and it
may ignore SIGTERM. After `--ask`, the line mode's `/quit`, the full-screen chat's Ctrl+Q and a
plain close, the child is gone. Every wait is bounded.
"""

from __future__ import annotations

import json
import os
import pty
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
from tests.support.readable import readable

FAMILY = SUPPORT / "mcp_family_server.py"
# Seconds a process is given to be gone: far longer than ocat takes (SIGTERM, 1 s, SIGKILL).
GONE_WITHIN = 15


def family_entry(folder: Path, on_eof: str, child: str = "group", stubborn: bool = False) -> dict[str, Any]:
    """The family server as a config entry; it writes "SERVER_PID CHILD_PID" to folder/pids."""
    return {"command": sys.executable, "args": [str(FAMILY)], "start_timeout": 60,
            "env": {"FAMILY_PIDS_FILE": str(folder / "pids"), "FAMILY_ON_EOF": on_eof, "FAMILY_CHILD": child,
                    "FAMILY_STUBBORN": "1" if stubborn else "0"}}


def started_pids(folder: Path) -> list[int]:
    """The server's pid and its child's, once the server has written them (at most 60 s)."""
    path = folder / "pids"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        if text.endswith("\n"):
            return [int(pid) for pid in text.split()]
        time.sleep(0.1)
    pytest.fail("the family server did not start its child within 60 s")


def gone(pids: list[int]) -> bool:
    """Whether every one of `pids` has ended, waiting at most GONE_WITHIN seconds."""
    deadline = time.monotonic() + GONE_WITHIN
    while any(running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not any(running(pid) for pid in pids)


def cleanup(pids: list[int]) -> None:
    """Kill what a failed test left behind (so one failure does not leave sleepers)."""
    for pid in pids:
        if running(pid):
            os.kill(pid, 9)


def config_file(cli: Cli, entry: dict[str, Any]) -> Path:
    path = cli.home / "family-config.yaml"
    path.write_text(json.dumps({"mcp_servers": {"fam": entry}}))
    return path


def chat_args(server: FakeLLMServer, config: Path) -> list[str]:
    return ["--config", str(config), "--no-vector-store", "--model", "openai/fake-model",
            "--set", f"llm.api_base={server.api_base}", "--set", "llm.api_key=sk-test", "--set", "tools.enabled=on"]


@pytest.mark.slow
@pytest.mark.parametrize(("on_eof", "child", "stubborn"), [
    ("exit", "group", False),     # the server exits on EOF; its child, in its group, is left to init
    ("exit", "session", False),   # ... and the child made a session of its own
    ("ignore", "group", True),    # the server ignores EOF and SIGTERM, and so does its child
])
def test_closing_ends_every_descendant_whatever_the_server_did(
    tmp_path: Path, on_eof: str, child: str, stubborn: bool
) -> None:
    config = parse_servers({"fam": family_entry(tmp_path, on_eof, child, stubborn)}, "test", tmp_path)[0]
    servers = McpServers([config], tmp_path / "logs")
    pids: list[int] = []
    try:
        servers.wait()
        assert servers.statuses()[0].state == "ready", servers.statuses()[0].error
        pids = started_pids(tmp_path)
        servers.close()
        assert gone(pids), [(pid, running(pid)) for pid in pids]
    finally:
        servers.close()
        cleanup(pids)


@pytest.mark.slow
def test_a_restart_ends_only_its_own_servers_family(tmp_path: Path) -> None:
    """Servers start side by side: the one that crashed is stopped and started again, and only
    its processes are ended, not those of the server started beside it."""
    fixture = SUPPORT / "mcp_fixture_server.py"
    configs = parse_servers({"fam": family_entry(tmp_path, "ignore"),
                             "fx": {"command": sys.executable, "args": [str(fixture)], "start_timeout": 60}},
                            "test", tmp_path)
    servers = McpServers(configs, tmp_path / "logs")
    pids: list[int] = []
    try:
        servers.wait()
        pids = started_pids(tmp_path)
        turn: set[str] = set()
        with pytest.raises(Exception, match="stopped during the call"):
            servers.call("fx", "crash", {}, restarted=turn)
        servers.call("fx", "lookup", {"word": "cat"}, restarted=turn)  # fx is started again
        assert turn == {"fx"} and all(running(pid) for pid in pids)
        assert servers.call("fam", "hello", {}, restarted=set()).content[0].text == "hello from the family"
    finally:
        servers.close()
        cleanup(pids)
    assert gone(pids)


@pytest.mark.slow
@pytest.mark.parametrize(("face", "on_eof"), [("--ask", "exit"), ("--plain", "exit"), ("--plain", "ignore")])
def test_ask_and_the_line_modes_quit_leave_no_descendant(
    cli: Cli, llm_server: FakeLLMServer, tmp_path: Path, face: str, on_eof: str
) -> None:
    config = config_file(cli, family_entry(tmp_path, on_eof))
    if face == "--ask":
        run = cli("--ask", "hi", *chat_args(llm_server, config))
    else:
        run = cli("--plain", *chat_args(llm_server, config), input="hi\n/quit\n")
    pids = started_pids(tmp_path)
    try:
        assert run.returncode == 0, run.stderr
        assert gone(pids)
    finally:
        cleanup(pids)


@pytest.mark.slow
@pytest.mark.parametrize("on_eof", ["exit", "ignore"])
def test_the_full_screen_chats_ctrl_q_leaves_no_descendant(
    cli: Cli, llm_server: FakeLLMServer, tmp_path: Path, on_eof: str
) -> None:
    """The real chat in a terminal (a pty), as a user runs it: it leaves at once (os._exit)."""
    config = config_file(cli, family_entry(tmp_path, on_eof))
    chat, controller = full_screen_chat(cli, chat_args(llm_server, config))
    pids: list[int] = []
    try:
        pids = started_pids(tmp_path)  # the chat starts its servers after its first frame
        _read_for(controller, 1.0)  # let the server answer the chat's hello
        os.write(controller, b"\x11")  # Ctrl+Q
        assert ended_draining(chat, controller), "the chat did not quit on Ctrl+Q"
        assert gone(pids), [(pid, running(pid)) for pid in pids]
    finally:
        if chat.poll() is None:
            chat.kill()
            chat.wait(10)
        os.close(controller)
        cleanup(pids)


def full_screen_chat(cli: Cli, args: list[str]) -> tuple[subprocess.Popen[bytes], int]:
    """The full-screen chat started with `args` in a pty, and the pty's controlling end."""
    env = {**cli.environ(), "TERM": "xterm-256color", "COLUMNS": "80", "LINES": "24"}
    controller, terminal = pty.openpty()
    chat = subprocess.Popen([sys.executable, "-m", "ocat", *args], stdin=terminal, stdout=terminal, stderr=terminal,
                            env=env, cwd=cli.home, start_new_session=True)
    os.close(terminal)
    return chat, controller


def ended_draining(chat: subprocess.Popen[bytes], controller: int, seconds: float = 60) -> bool:
    """Whether the chat ends within `seconds`, its terminal kept drained meanwhile (so it never
    blocks writing)."""
    deadline = time.monotonic() + seconds
    while chat.poll() is None and time.monotonic() < deadline:
        _read_for(controller, 0.2)
    return chat.poll() is not None


def _read_for(fd: int, seconds: float) -> None:
    """Read (and drop) what the chat writes to its terminal for `seconds`."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if readable(fd, left):
            try:
                os.read(fd, 65536)
            except OSError:
                return
