"""One store, many processes: a chat window open while the CLI adds, concurrent creation, crashes."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.cli import Cli
from tests.support.data import exchange_records
from tests.support.warm_start import python_command
from tests.support.window import ask_window, start_window

# A third process: it opens the store (through the window, while one serves it) and searches
# for the samples on stdin.
CHECK = r"""
import json, sys
from ocat.config.loading import load_settings
from ocat.memory import RetrievalLimits, open_store, retrieve
TOP = RetrievalLimits(exchange_results=1, document_results=0, exchange_threshold=0.0, document_threshold=0.0)
store = open_store(load_settings())
samples = json.loads(sys.stdin.read())
found = sum(retrieve(store, s["text"], TOP)[0].id == s["id"] for s in samples)
print(json.dumps({"count": store.count("exchange"), "found": found, "role": store.lease.role}))
"""


def test_an_open_window_and_a_headless_import_lose_nothing(cli: Cli, tmp_path: Path) -> None:
    data = exchange_records(1200)  # more than Chroma's sync_threshold (1,000), where the index used to be lost
    path = tmp_path / "many.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in data))
    samples = [{"id": r["exchange_id"], "text": f"User: {r['user_prompt']}\nAssistant: {r['assistant_response']}"}
               for r in data[::24]]
    window = start_window(cli)
    try:
        imported = cli("--import-memory", str(path), "--output", "json")
        assert imported.returncode == 0, imported.stderr
        assert imported.json()["result"]["added"] == 1200
        assert ask_window(window, samples) == {"count": 1200, "found": len(samples)}
        # A third process meanwhile goes through the window too.
        during = subprocess.run(python_command("-c", CHECK, env=cli.environ()), input=json.dumps(samples), capture_output=True,
                                text=True, env=cli.environ(), cwd=cli.home, check=True)
        assert json.loads(during.stdout) == {"count": 1200, "found": len(samples), "role": "client"}
    finally:
        assert window.stdin is not None
        window.stdin.write("quit\n")
        window.stdin.flush()
        window.wait(timeout=60)
    after = subprocess.run(python_command("-c", CHECK, env=cli.environ()), input=json.dumps(samples), capture_output=True,
                           text=True, env=cli.environ(), cwd=cli.home, check=True)
    assert json.loads(after.stdout) == {"count": 1200, "found": len(samples), "role": "owner"}


def test_several_processes_create_a_new_store_at_once(cli: Cli) -> None:
    procs = [
        subprocess.Popen(python_command("-m", "ocat", "--vector-store-stats", "--output", "json", env=cli.environ()),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli.environ(), cwd=cli.home)
        for _ in range(3)
    ]
    outputs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [err for _, err in outputs]
    assert all(json.loads(out)["result"]["exchanges"] == 0 for out, _ in outputs)


def test_a_killed_owner_does_not_wedge_the_store(cli: Cli) -> None:
    window = start_window(cli)
    server = json.loads((cli.store_path / ".ocat-server.json").read_text())
    window.send_signal(signal.SIGKILL)
    window.wait(timeout=30)
    # Its server dies with it, so the folder is free for the next owner.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if subprocess.run(["bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{server['port']}"],
                          capture_output=True).returncode != 0:
            break
        time.sleep(0.2)
    else:
        pytest.fail("the dead owner's memory server is still listening")
    stats = cli("--vector-store-stats", "--output", "json")
    assert stats.returncode == 0, stats.stderr
    assert stats.json()["result"]["exchanges"] == 0
