"""`python -m ocat` for the CLI tests, started from a warm interpreter.

Each `ocat` process of a test pays some 2.5 s before it does anything, 2.1 s of it importing
chromadb; the CLI tests start about three hundred. A warm server (tests/support/warm_server.py),
one per test worker, imports chromadb, the embedder's libraries and the ocat modules most runs
import once, and forks each run from there: the run is still a process of its own (its pid, its
descriptors, its exit code, its exit handlers, its environment and working folder), and only what
that server imported before the fork is shared (none of it reads the environment as it is
imported: tests/cli/test_warm_start.py). `Cli` uses it; `Running` (a process a test signals
or kills) and the tests that time or trace a start still start a new interpreter.

A run whose environment changes what an interpreter decides at its start (PYTHON* variables,
the locale's LANG and LC_*) is started cold, as is every run when PYTEST_OCAT_COLD_START=1.
"""

from __future__ import annotations

import io
import json
import locale
import os
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

SERVER = Path(__file__).with_name("warm_server.py")
LAUNCHER = Path(__file__).with_name("warm_exec.py")
# Read by an interpreter as it starts: a run that sets them differently needs a new interpreter.
STARTUP_PREFIXES = ("PYTHON", "LANG", "LC_")


@dataclass
class Finished:
    """A warm run's process id, exit code and output, decoded as subprocess.run(text=True) decodes."""

    pid: int
    returncode: int
    stdout: str
    stderr: str


class WarmServer:
    """The warm server of this process, started on first use and stopped with the process."""

    _lock = threading.Lock()
    _instance: WarmServer | None = None

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.environ = dict(os.environ)
        # An abstract socket's name: no file to clean up, no limit from the temporary folder's length.
        self.address = f"ocat-warm-{os.getpid()}-{secrets.token_hex(4)}"
        self.process = subprocess.Popen(
            [sys.executable, str(SERVER), str(theirs.fileno()), self.address],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=None,  # a server that fails to start says why in the test's output
            pass_fds=(theirs.fileno(),),
            cwd=Path(__file__).resolve().parents[2],
        )
        theirs.close()
        # Its listening socket is there once it says so (a launcher finds it from then on, and
        # waits for the warm-up behind it); a server that died first says nothing.
        ours.recv(16)
        self.control = ours
        self.send_lock = threading.Lock()
        self.owner = os.getpid()  # the process whose socket this is

    @classmethod
    def get(cls) -> WarmServer:
        """This process's server (a new one after a fork: the parent's socket is not ours to share)."""
        with cls._lock:
            server = cls._instance
            if server is None or server.owner != os.getpid() or server.process.poll() is not None:
                server = cls._instance = cls()
            return server

    def can_run(self, env: Mapping[str, str]) -> bool:
        """Whether a run with `env` starts as a new interpreter would (see STARTUP_PREFIXES)."""
        return starts_alike(env, self.environ)

    def run(self, args: list[str], *, input: str, env: Mapping[str, str], cwd: Path, timeout: float) -> Finished:
        """Run `python -m ocat *args` from the warm server; like subprocess.run(..., text=True)."""
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        mine, run_end = socket.socketpair()
        request = json.dumps({"args": args, "env": dict(env), "cwd": str(cwd)}).encode()
        try:
            with self.send_lock:
                socket.send_fds(self.control, [request], [stdin_r, stdout_w, stderr_w, run_end.fileno()])
        finally:
            for fd in (stdin_r, stdout_w, stderr_w):
                os.close(fd)
            run_end.close()
        mine.settimeout(timeout)
        replies = mine.makefile("r")
        pid = json.loads(replies.readline())["pid"]
        outputs: dict[int, bytes] = {}
        readers = [threading.Thread(target=_read_all, args=(fd, outputs), daemon=True) for fd in (stdout_r, stderr_r)]
        for reader in readers:
            reader.start()
        # Written from a thread, as subprocess.communicate does: a run may end before reading its
        # input (`--version`), or read it only after writing more than a pipe holds.
        writer = threading.Thread(target=_write_all, args=(stdin_w, input), daemon=True)
        writer.start()
        try:
            code = json.loads(replies.readline())["code"]
        except (TimeoutError, socket.timeout):
            os.kill(pid, signal.SIGKILL)
            raise subprocess.TimeoutExpired(["ocat", *args], timeout) from None
        finally:
            for thread in (*readers, writer):
                thread.join(timeout=10)
            replies.close()
            mine.close()
        return Finished(pid, code, _text(outputs.get(stdout_r, b"")), _text(outputs.get(stderr_r, b"")))


def python_command(*args: str, env: Mapping[str, str] | None = None, pid_fd: int | None = None) -> list[str]:
    """The command line that runs `python *args` (with the environment `env`, os.environ when None) from this
    worker's warm server through tests/support/warm_exec.py; a new interpreter's command line when `env` would
    start one differently or PYTEST_OCAT_COLD_START=1. `pid_fd`, given to the process (pass_fds), is where the
    launcher writes the run's own pid (see `launched`): signals sent to the launcher reach the run, except
    SIGKILL, which only ends it once the launcher is gone."""
    if warm_start_on():
        server = WarmServer.get()
        if server.can_run(os.environ if env is None else env):
            fd = "-" if pid_fd is None else str(pid_fd)
            return [sys.executable, str(LAUNCHER), server.address, fd, *args]
    return [sys.executable, *args]


def warm_ocat_folder(folder: Path, env: Mapping[str, str]) -> Path | None:
    """A folder holding an `ocat` command that runs `python -m ocat` from this worker's warm server,
    for a test that runs shell lines naming `ocat` (the README's): put it first on PATH. None when a
    run with `env` would start cold, so the installed command is the one to use."""
    command = python_command("-m", "ocat", env=env)
    if not launched(command):
        return None
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "ocat"
    script.write_text("#!/bin/sh\nexec " + " ".join(shlex.quote(part) for part in command) + ' "$@"\n')
    script.chmod(0o755)
    return folder


def startup_environ() -> dict[str, str]:
    """The variables of os.environ an interpreter reads as it starts (STARTUP_PREFIXES). A process
    whose environment is made up for it (an MCP server's: the SDK passes it only PATH, HOME and a
    few more, and its entry's `env`) needs them in that environment to start warm."""
    return {k: v for k, v in os.environ.items() if k.startswith(STARTUP_PREFIXES)}


def launched(command: list[str]) -> bool:
    """Whether `command` (from python_command) goes through the launcher, which then writes the run's pid."""
    return command[1:2] == [str(LAUNCHER)]


def starts_alike(env: Mapping[str, str], started_with: Mapping[str, str]) -> bool:
    """Whether an interpreter started with `env` decides at its start what one started with
    `started_with` decided: the same PYTHON*, LANG and LC_* variables."""
    keys = {k for k in (*env, *started_with) if k.startswith(STARTUP_PREFIXES)}
    return all(env.get(k) == started_with.get(k) for k in keys)


def _read_all(fd: int, into: dict[int, bytes]) -> None:
    chunks = []
    with os.fdopen(fd, "rb", closefd=True) as stream:
        while chunk := stream.read1(1 << 16):
            chunks.append(chunk)
    into[fd] = b"".join(chunks)


def _write_all(fd: int, text: str) -> None:
    stream = os.fdopen(fd, "w", encoding=locale.getpreferredencoding(False))
    # A run that ends without reading all of it breaks the pipe, on the write or on the flush
    # that closing does; subprocess.run ignores that too.
    try:
        stream.write(text)
        stream.flush()
    except BrokenPipeError:
        pass
    finally:
        try:
            stream.close()
        except BrokenPipeError:
            pass


def _text(data: bytes) -> str:
    """Bytes as subprocess.run(text=True) gives them: the locale's encoding, universal newlines."""
    return io.TextIOWrapper(io.BytesIO(data), encoding=locale.getpreferredencoding(False)).read()


# Not an OCAT_ variable: ocat refuses those it does not know, and each test's environment is stripped of them.
_COLD = os.environ.get("PYTEST_OCAT_COLD_START") == "1"


def warm_start_on() -> bool:
    """False when the run began with PYTEST_OCAT_COLD_START=1: every `Cli` run then starts a new interpreter."""
    return not _COLD
