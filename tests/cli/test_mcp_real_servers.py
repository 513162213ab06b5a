"""Issue 46: MCP servers from PyPI, run as a user configures them, through ocat's MCP client.

`mcp-server-time` (started `python -m mcp_server_time`, from the venv) and `mcp-server-git` (its
console script, next to the interpreter) are test extras (pyproject.toml): listed by
`--list-tools`, called by a scripted model in `--ask` with `--allow-tool`, their answers read.
Neither reaches the network: time zones come from the tz database, git runs on a repository
made in tmp_path; their proxies point at a closed port, so a call out would fail, not leave.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import Cli
from tests.support.fakes import FakeLLMServer
from tests.unit.test_mcp_client import ask_args, tool_messages, write_config

# Any HTTP(S) a server tried would go to this closed port and fail, never out.
OFFLINE = {"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "NO_PROXY": "",
           "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9", "no_proxy": ""}


def time_entry() -> dict[str, Any]:
    """mcp-server-time as its README configures it, with this venv's interpreter."""
    pytest.importorskip("mcp_server_time", reason="mcp-server-time is not installed (pip install -e '.[test]')")
    return {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "Europe/Paris"],
            "env": OFFLINE, "start_timeout": 60}


def git_entry(repository: Path) -> dict[str, Any]:
    """mcp-server-git by its console script (beside the venv's interpreter), on `repository`."""
    pytest.importorskip("mcp_server_git", reason="mcp-server-git is not installed (pip install -e '.[test]')")
    script = Path(sys.executable).parent / "mcp-server-git"
    if not script.exists():
        pytest.skip(f"mcp-server-git's console script is not at {script}")
    if shutil.which("git") is None:
        pytest.skip("mcp-server-git needs the git command, which is not on PATH")
    return {"command": str(script), "args": ["--repository", str(repository)], "env": OFFLINE, "start_timeout": 60}


def new_repository(folder: Path) -> Path:
    """A git repository with one file not yet added."""
    folder.mkdir()
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    (folder / "plan.md").write_text("the plan\n")
    return folder


@pytest.mark.slow
def test_list_tools_lists_the_real_servers_tools(cli: Cli, tmp_path: Path) -> None:
    config = write_config(cli, {"time": time_entry(), "git": git_entry(new_repository(tmp_path / "repo"))})
    listed = cli("--list-tools", "--config", str(config), "--output", "json")
    assert listed.returncode == 0, listed.stderr
    servers = {server["server"]: server for server in listed.json()["result"]["servers"]}
    assert servers["time"]["state"] == "ready" and servers["git"]["state"] == "ready", servers
    assert {"get_current_time", "convert_time"} <= {tool["name"] for tool in servers["time"]["tools"]}
    assert "git_status" in {tool["name"] for tool in servers["git"]["tools"]}
    shown = cli("--list-tools", "--config", str(config))
    assert shown.returncode == 0 and "time.get_current_time: denied here (no one to ask)" in shown.stdout


@pytest.mark.slow
def test_ask_calls_the_time_server_and_the_model_reads_its_answer(
    cli: Cli, llm_server: FakeLLMServer, tmp_path: Path
) -> None:
    config = write_config(cli, {"time": time_entry()})
    llm_server.script = [[{"name": "time__get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}], "It is late."]
    run = cli("--ask", "what time is it in Tokyo?",
              *ask_args(llm_server, config, "--allow-tool", "time.get_current_time"))
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "It is late."
    answer = json.loads(tool_messages(llm_server)[0]["content"])
    assert answer["timezone"] == "Asia/Tokyo" and answer["datetime"].endswith("+09:00")
    # The faces' line: server.tool, and the JSON summed up by its fields, not "{".
    assert "time.get_current_time: timezone: Asia/Tokyo, datetime: " in run.stderr, run.stderr
    assert "time__" not in run.stderr


@pytest.mark.slow
def test_ask_calls_the_git_server_on_a_new_repository(cli: Cli, llm_server: FakeLLMServer, tmp_path: Path) -> None:
    repository = new_repository(tmp_path / "repo")
    config = write_config(cli, {"git": git_entry(repository)})
    llm_server.script = [[{"name": "git__git_status", "arguments": {"repo_path": str(repository)}}], "One new file."]
    run = cli("--ask", "what changed?", *ask_args(llm_server, config, "--allow-tool", "git.git_status"))
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "One new file."
    status = tool_messages(llm_server)[0]["content"]
    assert "plan.md" in status and "error" not in status.lower(), status
    assert "git.git_status: " in run.stderr and "git__" not in run.stderr
