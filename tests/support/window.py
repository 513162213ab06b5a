"""A stand-in for the chat window: a long-lived process that owns and serves a store, so tests
can check what other processes do meanwhile."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from tests.support.cli import Cli
from tests.support.warm_start import python_command

# The window's script: it prints that it is ready, then on each line of samples (JSON) searches
# for them and prints the store's count and how many it found; "quit" ends it.
WINDOW = r"""
import json, sys
from ocat.config.loading import load_settings
from ocat.memory import RetrievalLimits, open_store, retrieve
TOP = RetrievalLimits(exchange_results=1, document_results=0, exchange_threshold=0.0, document_threshold=0.0)
store = open_store(load_settings(), serve=True)
print(json.dumps({"ready": True, "role": store.lease.role}), flush=True)
for line in sys.stdin:
    command = line.strip()
    if command == "quit":
        break
    samples = json.loads(command)
    found = sum(retrieve(store, s["text"], TOP)[0].id == s["id"] for s in samples)
    print(json.dumps({"count": store.count("exchange"), "found": found}), flush=True)
store.close()
"""


def start_window(cli: Cli) -> subprocess.Popen[str]:
    """Start the window on the CLI's store and wait until it serves it."""
    environ = cli.environ()
    window = subprocess.Popen(
        python_command("-c", WINDOW, env=environ), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env=environ, cwd=cli.home,
    )
    assert window.stdout is not None
    assert json.loads(window.stdout.readline()) == {"ready": True, "role": "serving owner"}
    return window


def ask_window(window: subprocess.Popen[str], samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The window's count of exchanges, and how many of `samples` it finds."""
    assert window.stdin is not None and window.stdout is not None
    window.stdin.write(json.dumps(samples) + "\n")
    window.stdin.flush()
    return json.loads(window.stdout.readline())
