"""Crashes: `kill -9` (and Ctrl+C) in the middle of an import, a document add or a chat turn.

Each test starts the real CLI, waits until it has written something (its progress lines on
stderr, or the fake provider receiving the request), kills it, then checks from fresh
processes that the store opens, that running the same command again ends with exactly the
right counts, and that what was written is found again.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from ocat.records import Exchange
from tests.support.warm_start import python_command
from tests.support.cli import Cli, Running, stats
from tests.support.data import WORDS, write_exchanges
from tests.support.fakes import FakeLLMServer

# Short chunks embed quickly, so a document of many write batches stays cheap to test.
SMALL_CHUNKS = ("--set", "chunking.chunk_size=200", "--set", "chunking.max_chunk_size=300")


def lexical_count(cli: Cli, kind: str) -> int:
    """Records in the lexical index, read from outside ocat."""
    with sqlite3.connect(cli.store_path / "ocat-lexical-default.sqlite3") as db:
        return int(db.execute(f"SELECT count(*) FROM ids_{kind}").fetchone()[0])


def top_hit(cli: Cli, query: str) -> dict[str, Any]:
    run = cli("--query-vector-store", query, "--results", "1", "--output", "json")
    assert run.returncode == 0, run.stderr
    return run.json()["result"]["results"][0]


def write_document(path: Path, paragraphs: int) -> list[str]:
    rng = random.Random(11)
    texts = [f"Paragraph {i} tells of the " + " ".join(rng.choice(WORDS) for _ in range(22)) + "." for i in range(paragraphs)]
    path.write_text("\n\n".join(texts), encoding="utf-8")
    return texts


# Every script below writes in batches of 32, not 256 (WRITE_BATCH, read where each write and its
# progress run): a crash between batches is the same at any size, and the tests then embed a few
# dozen records, not hundreds (a second of the real model instead of ten).
SMALL_BATCHES = """
import ocat.memory.ingest.documents, ocat.memory.storage.export_import, ocat.memory.storage.writes
BATCH = 32
for module in (ocat.memory.ingest.documents, ocat.memory.storage.export_import, ocat.memory.storage.writes):
    module.WRITE_BATCH = BATCH
"""

# An import whose model stops (as a slow one would) on the second batch, inside that batch's write
# (its lock taken), saying so in the file `sys.argv[1]`: the kill lands there, always after the
# first batch and before the last.
IMPORT_HELD_IN_THE_SECOND_BATCH = SMALL_BATCHES + r"""
import pathlib, sys, time
import ocat.memory.storage.export_import as export_import
from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder
held, real_write, real_embed, batches = pathlib.Path(sys.argv[1]), export_import._write, OnnxMiniLMEmbedder.embed, [0]
def write(*args):
    batches[0] += 1
    return real_write(*args)
def embed(self, texts):
    if batches[0] >= 2:
        held.write_text("held")
        while True:
            time.sleep(0.05)
    return real_embed(self, texts)
export_import._write, OnnxMiniLMEmbedder.embed = write, embed
sys.argv = ["ocat", *sys.argv[2:]]
from ocat.cli.dispatch import run
run()
"""


def test_kill_9_during_an_import_then_the_same_import_completes_it(cli: Cli, tmp_path: Path) -> None:
    source = tmp_path / "memory.jsonl"
    # Three batches of 32: the kill lands in the second, held on its first embedding; the rerun
    # writes the rest.
    count = 80
    exchanges = write_exchanges(source, count)
    held = tmp_path / "held"
    running = Running(cli, str(held), "--import-memory", str(source), script=IMPORT_HELD_IN_THE_SECOND_BATCH)
    running.wait_until(lambda _: held.exists())
    running.wait_for(f"imported 32/{count} records")
    running.kill()

    partial = stats(cli)["exchanges"]
    assert partial == 32  # the first batch, whole; nothing of the one killed mid-write
    again = cli("--import-memory", str(source), "--output", "json")
    assert again.returncode == 0, again.stderr
    assert again.json()["result"]["added"] == count - partial
    assert stats(cli)["exchanges"] == count
    assert lexical_count(cli, "exchange") == count  # the lexical index caught up with Chroma
    # A fresh process finds records written before the crash and after it.
    for exchange in (exchanges[3], exchanges[partial + 5], exchanges[-1]):
        hit = top_hit(cli, exchange.text)
        assert hit["id"] == exchange.exchange_id
    # And importing once more adds nothing.
    assert cli("--import-memory", str(source), "--output", "json").json()["result"]["added"] == 0


# An add whose model stops (as a slow one would) once the first write batch (32) is stored and a step of
# the second is embedded, saying so in the file `sys.argv[1]`: the kill or the Ctrl+C lands there, always
# after the first batch and before the last, on a document of any size past 48 chunks.
HELD_IN_THE_SECOND_BATCH = SMALL_BATCHES + r"""
import pathlib, sys, time
from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder
held, real, embedded = pathlib.Path(sys.argv[1]), OnnxMiniLMEmbedder.embed, [0]
def embed(self, texts):
    if embedded[0] >= BATCH + 16:
        held.write_text("held")
        while True:
            time.sleep(0.05)
    embedded[0] += len(texts)
    return real(self, texts)
OnnxMiniLMEmbedder.embed = embed
sys.argv = ["ocat", *sys.argv[2:]]
from ocat.cli.dispatch import run
run()
"""


def add_held_in_the_second_batch(cli: Cli, document: Path) -> Running:
    """`--add-to-vector-store document` (small chunks), once its model is held in the second write batch."""
    held = document.parent / "held"
    running = Running(cli, str(held), "--add-to-vector-store", str(document), *SMALL_CHUNKS,
                      script=HELD_IN_THE_SECOND_BATCH)
    running.wait_until(lambda _: held.exists())
    return running


def test_kill_9_during_a_document_add_leaves_it_detectably_partial_and_re_adding_completes_it(
    cli: Cli, tmp_path: Path
) -> None:
    document = tmp_path / "big.txt"
    paragraphs = write_document(document, 64)  # some 64 chunks: the kill lands after 32 (held there)
    running = add_held_in_the_second_batch(cli, document)
    running.kill()

    before = stats(cli)
    assert before["partial_documents"] == 1 and before["documents"] == 1
    assert before["document_chunks"] == 32  # the first batch, whole; nothing of the one killed mid-write
    again = cli("--add-to-vector-store", str(document), *SMALL_CHUNKS, "--output", "json")
    assert again.returncode == 0, again.stderr
    result = again.json()["result"]
    total = result["total_chunks"]
    assert before["document_chunks"] < total
    assert result["added_chunks"] == total - before["document_chunks"]
    after = stats(cli)
    assert after["document_chunks"] == total and after["documents"] == 1 and after["partial_documents"] == 0
    assert lexical_count(cli, "document") == total
    for paragraph in (paragraphs[2], paragraphs[-3]):
        assert paragraph in top_hit(cli, paragraph)["text"]
    # Adding it a third time stores nothing.
    assert cli("--add-to-vector-store", str(document), *SMALL_CHUNKS, "--output", "json").json()["result"]["added_chunks"] == 0


def test_ctrl_c_during_a_document_add_stops_cleanly_and_re_adding_completes_it(cli: Cli, tmp_path: Path) -> None:
    document = tmp_path / "long.md"
    write_document(document, 64)  # some 64 chunks: the stop lands after 32 (held there)
    running = add_held_in_the_second_batch(cli, document)
    assert running.kill(signal.SIGINT) == 130
    message = running.wait_for("running the same command again completes it\n")
    assert "ocat: interrupted" in message and "Traceback" not in message
    assert stats(cli)["partial_documents"] == 1
    again = cli("--add-to-vector-store", str(document), *SMALL_CHUNKS, "--output", "json")
    assert again.returncode == 0, again.stderr
    after = stats(cli)
    assert after["partial_documents"] == 0 and after["document_chunks"] == again.json()["result"]["total_chunks"]


def test_vdoc_and_the_cli_add_use_the_same_ingest_function(
    monkeypatch: pytest.MonkeyPatch, store: Any, tmp_path: Path
) -> None:
    import ocat.headless.actions
    import ocat.memory.ingest.paths
    from ocat.cli.dispatch import main
    from ocat.commands import run_command
    from ocat.config.loading import load_settings
    from ocat.chat.session import ChatSession

    real = ocat.memory.ingest.paths.add_path
    callers: list[str] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        callers.append(kwargs["source"])
        return real(*args, **kwargs)

    monkeypatch.setattr(ocat.memory.ingest.paths, "add_path", spy)
    monkeypatch.setattr(ocat.headless.actions, "open_configured_store", lambda settings: store)
    note = tmp_path / "note.md"
    note.write_text("the ferry leaves at noon")
    assert main(["--add-to-vector-store", str(note)]) == 0
    note.write_text("the ferry leaves at one")
    result = run_command(ChatSession(load_settings(env={}), store=store), f"/vdoc {note}")
    assert not result.error, result.text
    assert callers == ["cli", "vdoc_command"]
    # So everything proven above for --add-to-vector-store holds for /vdoc.


def test_kill_9_while_ask_waits_for_the_answer_stores_nothing(cli: Cli, llm_server: FakeLLMServer) -> None:
    llm_server.delay = 3.0  # the whole answer comes after 30 s
    args = ["--model", "openai/fake-model", "--set", f"llm.api_base={llm_server.api_base}", "--set", "llm.api_key=k"]
    running = Running(cli, "--ask", "what is the ferry time?", *args)
    deadline = time.monotonic() + 120
    while not llm_server.requests:
        assert time.monotonic() < deadline and running.process.poll() is None, "the request never arrived"
        time.sleep(0.1)
    running.kill()
    assert stats(cli)["exchanges"] == 0


def test_kill_9_mid_stream_keeps_finished_exchanges_and_stores_no_half_answer(
    cli: Cli, llm_server: FakeLLMServer
) -> None:
    llm_server.reply = "First answer."
    args = ["--plain", "--model", "openai/fake-model", "--set", f"llm.api_base={llm_server.api_base}",
            "--set", "llm.api_key=k"]
    running = Running(cli, *args, stdin=True)
    running.send("first question")
    running.wait_for("First answer.", stream="stdout")
    llm_server.reply = "A long second answer that streams slowly. " * 10
    llm_server.delay = 0.3
    running.send("second question")
    running.wait_for("A long second", stream="stdout")
    running.kill()
    after = stats(cli)
    assert after["exchanges"] == 1
    exported = cli("--export-memory", "-").json_lines()
    assert [(e["user_prompt"], e["assistant_response"]) for e in exported] == [("first question", "First answer.")]


# Import 75 exchanges (batches of 32) and die by SIGKILL at the second call of a write that follows
# Chroma's (the lexical index's, the prompt vectors'): the second batch is in Chroma, not in what
# that write keeps.
KILL_AT_SECOND_WRITE = SMALL_BATCHES + r"""
import importlib, os, signal, sys
module, cls, method = sys.argv[2].rsplit(".", 2)
owner = getattr(importlib.import_module(module), cls)
real, calls = getattr(owner, method), []
def write(self, *args):
    calls.append(1)
    if len(calls) == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(self, *args)
setattr(owner, method, write)
from ocat.cli.dispatch import main
sys.exit(main(["--import-memory", sys.argv[1]]))
"""


def import_and_die_at_the_second(cli: Cli, tmp_path: Path, write: str) -> list[Exchange]:
    """Import 75 exchanges in a process killed at the second call of `write` (module.Class.method)."""
    source = tmp_path / "memory.jsonl"
    exchanges = write_exchanges(source, 75)
    env = {**os.environ, "OCAT_VECTOR_STORE_PATH": str(cli.store_path)}
    died = subprocess.run(python_command("-c", KILL_AT_SECOND_WRITE, str(source), write, env=env), env=env, cwd=cli.home,
                          capture_output=True, text=True, timeout=300)
    assert died.returncode == -signal.SIGKILL, died.stderr
    return exchanges


def test_a_crash_between_the_chroma_and_the_lexical_write_is_repaired_on_open(cli: Cli, tmp_path: Path) -> None:
    exchanges = import_and_die_at_the_second(cli, tmp_path, "ocat.memory.storage.lexical_index.LexicalIndex.add")
    assert lexical_count(cli, "exchange") == 32  # the first batch only
    assert stats(cli)["exchanges"] == 64  # Chroma has two batches; opening it rebuilt the index
    assert lexical_count(cli, "exchange") == 64
    # A record of the batch the lexical index missed is found by a fresh process's search.
    assert top_hit(cli, exchanges[40].text)["id"] == exchanges[40].exchange_id
    assert cli("--import-memory", str(tmp_path / "memory.jsonl"), "--output", "json").json()["result"]["added"] == 11
    assert stats(cli)["exchanges"] == 75 and lexical_count(cli, "exchange") == 75


def prompt_vector_count(cli: Cli) -> int:
    """Prompt vectors beside the store, read from outside ocat."""
    with sqlite3.connect(cli.store_path / "ocat-prompts-default.sqlite3") as db:
        return int(db.execute("SELECT count(*) FROM prompt_vectors").fetchone()[0])


def test_a_crash_between_an_exchange_and_its_prompt_vector_is_repaired_on_open(cli: Cli, tmp_path: Path) -> None:
    exchanges = import_and_die_at_the_second(cli, tmp_path, "ocat.memory.storage.prompt_vectors.PromptVectors.write")
    assert prompt_vector_count(cli) == 32  # the second batch's exchanges are in Chroma, their prompts are not
    assert stats(cli)["exchanges"] == 64  # opening the store embedded the missing prompts
    assert prompt_vector_count(cli) == 64
    assert top_hit(cli, exchanges[40].user_prompt)["id"] == exchanges[40].exchange_id
    assert cli("--import-memory", str(tmp_path / "memory.jsonl"), "--output", "json").json()["result"]["added"] == 11
    assert prompt_vector_count(cli) == 75


def test_ctrl_c_mid_stream_in_the_line_mode_chat_cancels_the_turn_and_stores_nothing(
    cli: Cli, llm_server: FakeLLMServer
) -> None:
    llm_server.reply = "A long answer that streams slowly. " * 40  # 12 s: Ctrl+C lands mid-stream on a loaded machine too
    llm_server.delay = 0.3
    args = ["--plain", "--model", "openai/fake-model", "--set", f"llm.api_base={llm_server.api_base}",
            "--set", "llm.api_key=k"]
    running = Running(cli, *args, stdin=True)
    running.send("tell me a long story")
    running.wait_for("A long answer", stream="stdout")
    running.process.send_signal(signal.SIGINT)
    running.wait_for("[cancelled]", stream="stdout")
    llm_server.reply, llm_server.delay = "Short.", 0.0
    running.send("and a short one")
    running.wait_for("Short.", stream="stdout")
    assert running.process.stdin is not None
    running.process.stdin.close()
    assert running.process.wait(timeout=120) == 0
    exported = cli("--export-memory", "-").json_lines()
    assert [(e["user_prompt"], e["assistant_response"]) for e in exported] == [("and a short one", "Short.")]
