"""The CLI tests' warm start (tests/support/warm_start.py) runs `ocat` as a new interpreter would:
the same exit codes, output and error output, its own process, and the run's environment and folder."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ocat.mcp_client.server_processes import running
from tests.support.cli import Cli
from tests.support.derived_cache import WARM_MODEL
from tests.support.readable import readable
from tests.support.paths import REPO
from tests.support.warm_start import LAUNCHER, SERVER, python_command, starts_alike, WarmServer


def _comparable(output: str) -> str:
    """A JSON document without its duration (the one figure two runs never share), its keys in
    order (Chroma gives a record's metadata in an order of its own each time)."""
    try:
        document = json.loads(output)
    except ValueError:
        return output
    document.get("meta", {}).pop("duration_ms", None)
    return json.dumps(document, sort_keys=True)


def _cold(cli: Cli, *args: str, input: str = "") -> tuple[int, str, str]:
    done = subprocess.run([sys.executable, "-m", "ocat", *args], input=input, capture_output=True, text=True,
                          env=cli.environ(), cwd=cli.home, timeout=180)
    return done.returncode, _comparable(done.stdout), done.stderr


def _warm(cli: Cli, *args: str, input: str = "") -> tuple[int, str, str]:
    done = WarmServer.get().run(list(args), input=input, env=cli.environ(), cwd=cli.home, timeout=180)
    return done.returncode, _comparable(done.stdout), done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("args", [
    ("--version",),
    ("--no-such-flag",),  # argparse's usage error: exit 2, the usage on stderr
    ("--vector-store-stats", "--output", "json"),
    ("--query-vector-store", "-"),  # queries from stdin, on an empty store
])
def test_a_warm_run_prints_and_exits_as_a_cold_one(cli: Cli, args: tuple[str, ...]) -> None:
    cold, warm = _cold(cli, *args, input="ferry times\n"), _warm(cli, *args, input="ferry times\n")
    assert warm == cold


@pytest.mark.slow
def test_a_warm_run_embeds_as_a_cold_one_with_the_servers_model_session(cli: Cli, tmp_path: Path) -> None:
    # The lean graph the server loads its sessions from, which each test's cache links to
    # (tests/support/derived_cache.py): a run's query is embedded with the server's session.
    assert os.path.isfile(os.environ[WARM_MODEL])
    note = tmp_path / "note.md"
    note.write_text("The ferry to the island leaves at nine.\n\nThe kettle is descaled on Mondays.\n")
    assert cli("--add-to-vector-store", str(note)).returncode == 0
    args = ("--query-vector-store", "when does the ferry to the island leave", "--output", "json")
    cold, warm = _cold(cli, *args), _warm(cli, *args)
    assert warm == cold and json.loads(warm[1])["result"]["results"][0]["score"] > 0.5


@pytest.mark.slow
def test_a_warm_run_is_a_process_of_its_own_with_the_runs_environment_and_folder(cli: Cli) -> None:
    # --vector-store-stats names the store of OCAT_VECTOR_STORE_PATH: the run's, not the server's.
    server = WarmServer.get()
    done = server.run(["--vector-store-stats", "--output", "json"], input="", env=cli.environ(), cwd=cli.home,
                      timeout=180)
    assert json.loads(done.stdout)["result"]["path"] == str(cli.store_path)
    # Forked, not run inside the server or this process: the server lives on for the next run.
    assert done.pid not in (server.process.pid, os.getpid()) and server.process.poll() is None


def test_a_run_that_changes_how_an_interpreter_starts_is_started_cold() -> None:
    started_with = {"PATH": "/bin", "LANG": "C.UTF-8", "PYTHONPATH": "/repo"}
    assert starts_alike({**started_with, "HOME": "/tmp/h", "OCAT_LLM_MODEL": "m"}, started_with)
    assert not starts_alike({**started_with, "PYTHONIOENCODING": "latin-1"}, started_with)
    assert not starts_alike({**started_with, "LC_ALL": "C"}, started_with)
    assert not starts_alike({"PATH": "/bin", "LANG": "C.UTF-8"}, started_with)  # PYTHONPATH removed


@pytest.mark.slow
def test_a_run_may_exit_before_reading_its_input_however_much_there_is(cli: Cli) -> None:
    # More than a pipe holds, to a run that never reads it: written from a thread, as subprocess.run does.
    done = WarmServer.get().run(["--version"], input="x" * (1 << 20), env=cli.environ(), cwd=cli.home, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("ocat ")


# -- the launcher (tests/support/warm_exec.py): a warm run started by its command line ----------------

SHOW = "import os, sys; print(sys.argv, repr(sys.path[0]), __name__, os.getcwd(), os.environ.get('SEEN'))"


@pytest.mark.slow
@pytest.mark.parametrize("args", [
    ("-c", SHOW, "a", "b"),
    ("-c", "import sys; sys.exit(3)"),
    ("-c", "raise ValueError('boom')"),
    ("-c", "import sys; sys.exit('a message')"),
])
def test_a_launched_run_is_what_python_would_run(tmp_path: Path, args: tuple[str, ...]) -> None:
    env = {**os.environ, "SEEN": "yes"}
    runs = [subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
            for command in ([sys.executable, *args], python_command(*args, env=env))]
    cold, warm = ((run.returncode, run.stdout, run.stderr) for run in runs)
    assert runs[1].args[1] == str(LAUNCHER)  # it did go through the warm server
    assert warm == cold


@pytest.mark.slow
def test_a_launcher_passes_signals_on_and_its_kill_ends_the_run(tmp_path: Path) -> None:
    sleeper = "import os, time; print(os.getpid(), flush=True); time.sleep(60)"
    pid_r, pid_w = os.pipe()
    interrupted = subprocess.Popen(python_command("-c", sleeper, pid_fd=pid_w), stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, pass_fds=(pid_w,))
    os.close(pid_w)
    assert interrupted.stdout is not None
    run_pid = int(interrupted.stdout.readline())
    with os.fdopen(pid_r) as said:
        assert int(said.readline()) == run_pid != interrupted.pid  # the run is not its launcher
    interrupted.send_signal(signal.SIGINT)
    # The run died of it (KeyboardInterrupt, uncaught), and its launcher as it did.
    assert interrupted.wait(timeout=30) == -signal.SIGINT
    assert "KeyboardInterrupt" in interrupted.stderr.read()  # type: ignore[union-attr]

    killed = subprocess.Popen(python_command("-c", sleeper), stdout=subprocess.PIPE, text=True)
    assert killed.stdout is not None
    run_pid = int(killed.stdout.readline())
    killed.kill()  # SIGKILL cannot be passed on: the server sees the launcher's socket close
    killed.wait(timeout=30)
    deadline = time.monotonic() + 30
    while running(run_pid):
        assert time.monotonic() < deadline, "the run outlived its killed launcher"
        time.sleep(0.05)



@pytest.mark.slow
def test_a_run_whose_launcher_is_gone_before_its_pid_is_told_ends_too(tmp_path: Path) -> None:
    # The race stop 56's CI met: a launcher killed as soon as its run printed, before the waiter
    # told it the run's pid. The waiter's first write then fails, and the run must still go.
    server = WarmServer.get()
    sleeper = "import os, time; print(os.getpid(), flush=True); time.sleep(60)"
    out_r, out_w = os.pipe()
    request = json.dumps({"argv": ["-c", sleeper], "env": dict(os.environ), "cwd": str(tmp_path)})
    # A launcher that asks for the run and is gone at once, before the server has even accepted it.
    asks_and_goes = (
        "import socket, sys\n"
        "channel = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
        "channel.connect('\\0' + sys.argv[1])\n"
        "socket.send_fds(channel, [sys.argv[2].encode()], [0, int(sys.argv[3]), 2])\n"
    )
    with open(os.devnull) as stdin:
        subprocess.run([sys.executable, "-c", asks_and_goes, server.address, request, str(out_w)], stdin=stdin,
                       pass_fds=(out_w,), check=True, timeout=30)
    os.close(out_w)
    # The run holds its stdout till it ends (it may be killed before it prints at all): the
    # pipe's end of file is the run's end.
    deadline = time.monotonic() + 30
    with os.fdopen(out_r, "rb", buffering=0) as output:
        while True:
            assert readable(output, max(0.0, deadline - time.monotonic())), "the run outlived a launcher gone before it was told its pid"
            if not output.read(4096):
                break


@pytest.mark.slow
def test_the_mcp_fixture_server_is_forked_from_the_warm_server_with_the_sdk_imported(tmp_path: Path) -> None:
    """Issue 50: a start of the fixture MCP server costs a fork, not an interpreter importing the SDK."""
    from ocat.config.mcp_servers import parse_servers
    from ocat.mcp_client.servers import McpServers, result_text
    from tests.unit.test_mcp_client import calls_made, fixture_entry

    sdk = "import sys; print(sorted({'anyio', 'mcp.types', 'mcp.server.mcpserver', 'mcp.client.stdio'} - set(sys.modules)))"
    before = subprocess.run(python_command("-c", sdk), capture_output=True, text=True, timeout=60)
    assert before.stdout.strip() == "[]", before.stderr  # imported before the fork, by the server
    entry = fixture_entry(tmp_path)
    servers = McpServers(parse_servers({"fx": entry}, "test", tmp_path), tmp_path / "logs")
    try:
        servers.wait()
        assert "definition 42" in result_text(servers.call("fx", "lookup", {"word": "cat"}, restarted=set()))
        waiter = _parent(calls_made(tmp_path)[0]["pid"])
        assert _parent(waiter) == WarmServer.get().process.pid
    finally:
        servers.close()


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[1])


def test_the_waits_see_descriptors_numbered_past_what_select_can_watch() -> None:
    """A worker that has run many tests holds thousands of descriptors (each store opened leaves
    Chroma's open), and the warm server's control socket keeps the worker's number for it: with
    select() the server died of "filedescriptor out of range" and every warm start after it failed."""
    from tests.support.warm_server import _readable

    held = [os.pipe() for _ in range(600)]
    try:
        quiet, spoken = socket.socketpair()
        assert spoken.fileno() > 1024
        quiet.send(b"x")
        assert _readable(spoken.fileno()) == {spoken.fileno()}
        assert readable(spoken, 1) and not readable(quiet, 0)
        quiet.close()
        spoken.close()
    finally:
        for fds in held:
            for fd in fds:
                os.close(fd)


# What importing the warm-up's ocat modules may touch: a read of the environment or the working
# folder there would be the server's, not the run's, in every run forked from it.
IMPORT_WATCH = """
import importlib, json, os, sys, threading
sys.path.insert(0, sys.argv[1])
import warm_server
for name in warm_server.WARM:
    importlib.import_module(name)
read, asked = [], []

class Watched(type(os.environ)):
    def __getitem__(self, key):
        read.append(key)
        return super().__getitem__(key)

    def __contains__(self, key):
        read.append(key)
        return super().__contains__(key)

watched = Watched(os.environ._data, os.environ.encodekey, os.environ.decodekey, os.environ.encodevalue,
                  os.environ.decodevalue)
os.environ = watched
getcwd = os.getcwd
os.getcwd = lambda: asked.append("getcwd") or getcwd()
threads = threading.active_count()
for name in warm_server.WARM_OCAT:
    importlib.import_module(name)
print(json.dumps({"read": sorted(set(read)), "asked": asked, "threads": threading.active_count() - threads,
                  "imported": sorted(m for m in sys.modules if m.split(".")[0] in ("litellm", "textual", "openai"))}))
"""


@pytest.mark.slow
def test_the_warm_ocat_modules_read_no_environment_folder_or_thread_as_they_are_imported() -> None:
    done = subprocess.run([sys.executable, "-c", IMPORT_WATCH, str(SERVER.parent)], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    # Nor do they bring the libraries that ocat keeps off the start of a run (each is a cold test's to check).
    assert seen == {"read": [], "asked": [], "threads": 0, "imported": []}
