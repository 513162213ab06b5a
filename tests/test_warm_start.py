"""The CLI tests' warm start (tests/support/warm_start.py) runs `ocat` as a new interpreter would:
the same exit codes, output and error output, its own process, and the run's environment and folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.cli import Cli
from tests.support.warm_start import starts_alike, WarmServer


def _comparable(output: str) -> str:
    """A JSON document without its duration (the one figure two runs never share)."""
    try:
        document = json.loads(output)
    except ValueError:
        return output
    document.get("meta", {}).pop("duration_ms", None)
    return json.dumps(document)


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
