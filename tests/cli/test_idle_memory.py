"""A chat that waits gives back what its model and the C heap hold for nothing (issue 49, idle memory).

The chat's memory opens as it does for a user (`open_chat`, serving its store through `chroma run`)
in a fresh interpreter (the tests' warm server has loaded the model already, so its process would
say nothing of this), which then reads its own resident memory: once warmed up, and after a long
exchange is kept. The figures are memory, not time: what was freed is either given back or not.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import pytest

from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder, release_idle_memory
from tests.support import MODEL_DIR
from tests.support.cli import Cli
from tests.support.fakes import FakeLLMServer

MiB = 1024 * 1024

CHAT_WAITS = """
import json, re, sys, threading
from ocat.config.loading import load_settings
from ocat.chat.session import open_chat
from ocat.records import Exchange

def resident(key):
    return int(re.search(key + r":\\s+(\\d+)", open("/proc/self/status").read()).group(1)) * 1024

def finished(name):
    for thread in threading.enumerate():
        if thread.name == name:
            thread.join(120)

session = open_chat(load_settings(), dummy=False, serve=True, stream=sys.stderr)
finished("ocat-warm-up")
finished("ocat-release")
warm = {"rss": resident("VmRSS"), "peak": resident("VmHWM")}
answer = " ".join(f"word{n} of a long answer about the footbridge and its bearings" for n in range(120))
session.session_memory.keep(Exchange("tell me all about the footbridge", answer, session.thread_id, "s"))
finished("ocat-release")
kept = resident("VmRSS")
session.session_memory.close()
print(json.dumps({"warm": warm, "kept": kept}))
"""


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and glibc's heap")
def test_a_chat_waiting_for_its_prompt_gives_back_what_it_freed(cli: Cli) -> None:
    run = subprocess.run([sys.executable, "-c", CHAT_WAITS], capture_output=True, text=True, env=cli.environ(),
                         cwd=cli.home, timeout=240)
    assert run.returncode == 0, run.stderr
    figures = json.loads(run.stdout.splitlines()[-1])
    # Building the model's session frees ~60 MiB (what its optimiser folded); kept, the chat sat
    # at its peak (242 MiB resident, peak 242; given back: 187, peak 243).
    assert figures["warm"]["rss"] <= figures["warm"]["peak"] - 30 * MiB, figures
    # A long exchange's passages grew the model's arena and the heap by ~56 MiB for the chat's
    # life (298 MiB after it); given back, ~6 MiB (193).
    assert figures["kept"] <= figures["warm"]["rss"] + 25 * MiB, figures


@pytest.mark.slow
def test_giving_back_idle_memory_keeps_the_vectors_bit_for_bit() -> None:
    texts = ["the footbridge's tuned mass damper", "who supplies the bearings " * 60, "short"]
    embedder = OnnxMiniLMEmbedder(MODEL_DIR)
    before = embedder.embed(texts)
    release_idle_memory(embedder)
    assert embedder.embed(texts) == before
    release_idle_memory(embedder)  # twice in a row: nothing left to give back, nothing breaks
    assert embedder.embed(texts[:1]) == before[:1]


def _resident(pid: int) -> int:
    text = open(f"/proc/{pid}/status").read()
    return int(text.split("VmRSS:")[1].split()[0]) * 1024


def _read_to(stream: IO[str], word: str) -> None:
    """Read the chat's output up to a line that holds `word` (its command's answer)."""
    for line in stream:
        if word in line:
            return
    raise AssertionError(f"the chat ended before saying {word!r}")


def _settled(pid: int) -> int:
    """The process's RSS once it has moved less than 2 MiB over two seconds (at most a minute):
    its threads done, whatever they give back given back."""
    readings: list[int] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        readings.append(_resident(pid))
        if len(readings) >= 10 and max(readings[-10:]) - min(readings[-10:]) < 2 * MiB:
            break
        time.sleep(0.2)
    return readings[-1]


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and glibc's heap")
def test_a_vdoc_in_the_line_mode_gives_back_what_its_batch_took(cli: Cli, llm_server: FakeLLMServer,
                                                                 tmp_path: Path) -> None:
    # What the batch grows is the model's arena for one batch (two windows of 256 tokens) and the
    # heap around it, the same for any document that fills one: 20 sections kept +34 MiB without
    # the release (150 kept +37; given back, +7 and +10), in 10 s instead of 28.
    big = tmp_path / "notes.txt"
    big.write_text("\n\n".join(f"Section {n}. The footbridge's bearing {n} was made by supplier {n % 7}, "
                               f"inspected in month {n % 12}, and its damper tuned to {n}.{n % 10} Hz. " * 6
                               for n in range(20)))
    chat = subprocess.Popen([sys.executable, "-m", "ocat", "--plain", "--model", "openai/fake-model",
                             "--set", f"llm.api_base={llm_server.api_base}", "--set", "llm.api_key=sk-test"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=cli.environ(), cwd=cli.home)
    assert chat.stdin is not None and chat.stdout is not None
    try:
        chat.stdin.write("/vstats\n")
        chat.stdin.flush()
        _read_to(chat.stdout, "floor_raise")
        waiting = _settled(chat.pid)  # warmed up and given back
        chat.stdin.write(f"/vdoc {big}\n")
        chat.stdin.flush()
        _read_to(chat.stdout, "Added ")
        after = _settled(chat.pid)
    finally:
        chat.stdin.close()
        chat.wait(timeout=60)
    # Kept, the batch's arena and heap stayed for the chat's life (~50 MiB); given back, a few.
    assert after <= waiting + 20 * MiB, (waiting / MiB, after / MiB)
