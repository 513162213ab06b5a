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

import pytest

from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder, release_idle_memory
from tests.support import MODEL_DIR
from tests.support.cli import Cli

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
