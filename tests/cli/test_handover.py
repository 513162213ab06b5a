"""A serving owner that quits hands the store over without a word to whoever comes meanwhile:
right after the chat quits, a CLI command waited the moment the chat's memory server took to
stop, saying "process N holds it and is starting its memory server ... waits up to 10 min"."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from ocat.memory.sharing.lock_holders import OWNER_FILE
from tests.support.warm_start import python_command
from tests.support.cli import Cli

pytestmark = pytest.mark.slow

# A chat window stand-in whose memory server takes its time to stop as it quits (a busy machine):
# `stop_seconds`, or until the file `sys.argv[2]` appears (made by a test that has seen what it waits for).
SLOW_TO_QUIT = r"""
import os, sys, time
from ocat.memory.sharing import owner_lock
stop = owner_lock.stop_server
def slow_stop(server, kill=False):
    deadline = time.monotonic() + float(sys.argv[1])
    while time.monotonic() < deadline and not os.path.exists(sys.argv[2]):
        time.sleep(0.05)
    stop(server, kill=kill)
owner_lock.stop_server = slow_stop
from ocat.config.loading import load_settings
from ocat.memory import open_store
store = open_store(load_settings(), serve=True)
print("ready", flush=True)
sys.stdin.readline()
print("closing", flush=True)
store.close()
"""


def start_quitting_window(cli: Cli, stop_seconds: float, stopped: Path | None = None) -> subprocess.Popen[str]:
    """The stand-in, told to quit; it stops its server after `stop_seconds`, or once `stopped` exists."""
    stopped = stopped or cli.home / "never-made"
    window = subprocess.Popen(python_command("-c", SLOW_TO_QUIT, str(stop_seconds), str(stopped), env=cli.environ()),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=cli.environ(), cwd=cli.home)
    assert window.stdin is not None and window.stdout is not None
    assert window.stdout.readline() == "ready\n"
    window.stdin.write("quit\n")
    window.stdin.flush()
    assert window.stdout.readline() == "closing\n"
    # Only once it says it is closing is the owner past the point where a newcomer would use its server.
    record = cli.store_path / OWNER_FILE
    deadline = time.monotonic() + 60
    while '"closing": true' not in (record.read_text() if record.exists() else ""):
        assert time.monotonic() < deadline and window.poll() is None, "the owner never said it was closing"
        time.sleep(0.05)
    return window


def test_a_command_right_after_the_chat_quits_waits_for_the_handover_quietly(cli: Cli) -> None:
    window = start_quitting_window(cli, stop_seconds=6.0)
    try:
        started = time.monotonic()
        run = cli("--vector-store-stats")
        took = time.monotonic() - started
        assert window.poll() is not None or took > 1.0  # it did meet the closing owner
    finally:
        window.wait(timeout=60)
    assert run.returncode == 0, run.stderr
    assert "exchanges: 0" in run.stdout
    assert "waiting for the store" not in run.stderr and "starting its memory server" not in run.stderr, run.stderr
    assert run.stderr == ""


def test_a_handover_that_takes_too_long_is_said_as_any_wait(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    # Past the quiet grace, whoever waits says what it waits for, as for any other owner.
    from ocat.memory.sharing import owner_lock

    stopped = cli.home / "stopped"
    window = start_quitting_window(cli, stop_seconds=8.0, stopped=stopped)
    heard: list[str] = []

    def said(line: str) -> None:
        heard.append(line)
        stopped.touch()  # heard: the owner need not take its full 8 s

    try:
        monkeypatch.setattr(owner_lock, "HANDOVER_SECONDS", 1.0)
        lease = owner_lock.acquire(cli.store_path, serve=False, notify=said, wait_seconds=60)
        lease.release()
    finally:
        window.wait(timeout=60)
    assert heard and "is closing, and hands it over once its memory server has stopped" in heard[0]
