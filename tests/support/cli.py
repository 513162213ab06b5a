"""The ocat CLI as a subprocess, against a private store: run to completion (`Cli`), or in the
background and read as it goes (`Running`)."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, Mapping

from tests.support.warm_start import launched, python_command, WarmServer, warm_start_on


@dataclass
class CliResult:
    """What a CLI run printed and returned."""

    returncode: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        """stdout as one JSON document."""
        return json.loads(self.stdout)

    def json_lines(self) -> list[Any]:
        """stdout as JSON Lines."""
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]


@dataclass
class Cli:
    """Runs `python -m ocat` in a subprocess against a private store."""

    home: Path
    store_path: Path
    env: dict[str, str] = field(default_factory=dict)

    def environ(self, env: Mapping[str, str | None] | None = None) -> dict[str, str]:
        """The environment of an ocat process on this store; env values of None remove that variable."""
        merged = {**os.environ, "OCAT_VECTOR_STORE_PATH": str(self.store_path), **self.env, **(env or {})}
        return {k: v for k, v in merged.items() if v is not None}

    def __call__(self, *args: str, input: str | None = None, env: dict[str, str | None] | None = None) -> CliResult:
        """Run ocat with args; env values of None remove that variable. The process is forked
        from this worker's warm server (tests/support/warm_start.py) unless it needs a new interpreter."""
        environ = self.environ(env)
        if warm_start_on():
            server = WarmServer.get()
            if server.can_run(environ):
                done = server.run(list(args), input=input or "", env=environ, cwd=self.home, timeout=180)
                return CliResult(done.returncode, done.stdout, done.stderr)
        completed = subprocess.run(
            [sys.executable, "-m", "ocat", *args],
            input=input if input is not None else "",
            capture_output=True,
            text=True,
            env=environ,
            cwd=self.home,
            timeout=180,
        )
        return CliResult(completed.returncode, completed.stdout, completed.stderr)


def stored_beyond(stderr: str, count: int) -> bool:
    """Whether an add's progress lines (`NAME: done/total chunks stored`) went past `count`."""
    return any(int(done) > count for done in re.findall(r": (\d+)/\d+ chunks stored", stderr))


def stats(cli: Cli) -> dict[str, Any]:
    """The store's counts, as `--vector-store-stats` reports them."""
    run = cli("--vector-store-stats", "--output", "json")
    assert run.returncode == 0, run.stderr
    return run.json()["result"]


class Running:
    """A CLI process started in the background, with its output read line by line. It runs from the
    warm server (tests/support/warm_exec.py stands for it) unless it needs a new interpreter; `pid` is
    the run's own, which `kill` signals."""

    def __init__(
        self, cli: Cli, *args: str, stdin: bool = False, env: dict[str, str] | None = None, script: str | None = None
    ) -> None:
        """`script`: Python run instead of `-m ocat` (with `args` as its arguments), to set a test's hooks first."""
        environ = cli.environ(env)
        pid_r, pid_w = os.pipe()
        start = ("-c", script) if script is not None else ("-m", "ocat")
        command = python_command(*start, *args, env=environ, pid_fd=pid_w)
        try:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=environ,
                cwd=cli.home,
                pass_fds=(pid_w,) if launched(command) else (),
            )
        finally:
            os.close(pid_w)
        with os.fdopen(pid_r) as said:
            # Started cold, the process is the run; else its launcher says the run's pid (or its own
            # when it became the interpreter, having found no server).
            self.pid = int(said.readline()) if launched(command) else self.process.pid
        self.lines: dict[str, queue.Queue[str]] = {"stdout": queue.Queue(), "stderr": queue.Queue()}
        self.seen: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self.pumps: dict[str, threading.Thread] = {}
        for name, stream in (("stdout", self.process.stdout), ("stderr", self.process.stderr)):
            self.pumps[name] = threading.Thread(target=self._pump, args=(stream, self.lines[name]), daemon=True)
            self.pumps[name].start()

    @staticmethod
    def _pump(stream: IO[str] | None, into: queue.Queue[str]) -> None:
        assert stream is not None
        # Read by character: a streamed answer has no newline until it is finished.
        while piece := stream.read(1):
            into.put(piece)

    def wait_until(self, holds: Callable[[str], bool], *, stream: str = "stderr", timeout: float = 240) -> str:
        """Wait until `holds(everything read so far)`; return that text."""
        deadline = time.monotonic() + timeout
        while not holds("".join(self.seen[stream])):
            if time.monotonic() > deadline or (self.process.poll() is not None and self.lines[stream].empty()):
                raise AssertionError(f"never happened on {stream}: {''.join(self.seen[stream])!r}")
            try:
                self.seen[stream].append(self.lines[stream].get(timeout=0.5))
            except queue.Empty:
                pass
        return "".join(self.seen[stream])

    def wait_for(self, text: str, *, stream: str = "stderr", timeout: float = 240) -> str:
        """Wait until `text` has appeared on the stream; return everything read so far."""
        deadline = time.monotonic() + timeout
        while text not in "".join(self.seen[stream]):
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} never appeared on {stream}: {''.join(self.seen[stream])!r}")
            try:
                self.seen[stream].append(self.lines[stream].get(timeout=0.5))
            except queue.Empty:
                if self.process.poll() is not None and self.lines[stream].empty():
                    raise AssertionError(
                        f"exited ({self.process.returncode}) before {text!r}: {''.join(self.seen[stream])!r}"
                    ) from None
        return "".join(self.seen[stream])

    def said(self, stream: str = "stderr", *, timeout: float = 60) -> str:
        """Everything the ended run wrote on `stream`: read up to the stream's end (which comes as
        soon as the run has exited), not until a quiet second has passed."""
        assert self.process.poll() is not None, "the run has not ended"
        self.pumps[stream].join(timeout)
        assert not self.pumps[stream].is_alive(), f"{stream} never ended"
        while not self.lines[stream].empty():
            self.seen[stream].append(self.lines[stream].get_nowait())
        return "".join(self.seen[stream])

    def send(self, line: str) -> None:
        """Type a line into the process's stdin."""
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def kill(self, sig: int = signal.SIGKILL) -> int:
        """Send a signal to the run and wait for it to end; returns its exit code."""
        os.kill(self.pid, sig)
        return self.process.wait(timeout=120)
