"""Bad input: each gets a clear message and its documented exit code (or an in-app error), no
traceback, and the store keeps what it had. docs/RELIABILITY.md lists these tests in a table."""

from __future__ import annotations

import os
import random
import re
import signal
import socket
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import Cli, Running, stats, stored_beyond
from tests.support.data import WORDS, write_exchanges
from tests.support.fakes import FakeLLMServer
from tests.support.templates import StoreTemplates

KEEP = "The lighthouse keeper feeds the gulls at dawn."


def _one_note(cli: Cli, folder: Path) -> None:
    note = folder / "keep.md"
    note.write_text(KEEP)
    assert cli("--add-to-vector-store", str(note)).returncode == 0


@pytest.fixture
def seeded(cli: Cli, store_templates: StoreTemplates) -> Cli:
    """The CLI on a store that already holds one document (added once per worker, copied into
    each test: tests/support/templates.py)."""
    store_templates.copy_into(cli, "one-note", _one_note)
    return cli


def assert_kept(cli: Cli) -> None:
    """The store still holds exactly the seeded document, and finds it."""
    assert stats(cli)["documents"] == 1
    found = cli("--query-vector-store", "who feeds the gulls", "--output", "json").json()["result"]["results"]
    assert found and found[0]["text"] == KEEP


def assert_clean_failure(run: Any, code: int, *needles: str) -> None:
    assert run.returncode == code, (run.returncode, run.stderr)
    assert "Traceback" not in run.stderr
    for needle in needles:
        assert needle in run.stderr, run.stderr


# -- files -------------------------------------------------------------------------------------


def test_a_folder_without_text_files_is_refused(seeded: Cli, tmp_path: Path) -> None:
    folder = tmp_path / "pictures"
    folder.mkdir()
    (folder / "a.png").write_bytes(b"\x89PNG")
    run = seeded("--add-to-vector-store", str(folder))
    assert_clean_failure(run, 1, f"ocat: {folder} holds no .md or .txt files")
    assert_kept(seeded)


def test_a_binary_file_is_refused(seeded: Cli, tmp_path: Path) -> None:
    blob = tmp_path / "photo.md"
    blob.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    run = seeded("--add-to-vector-store", str(blob), "--output", "json")
    assert_clean_failure(run, 1, "looks like a binary file, not text")
    assert run.json()["error"]["type"] == "InputFileError"
    assert_kept(seeded)


def test_non_utf8_text_is_decoded_with_a_fallback_not_dropped(cli: Cli, tmp_path: Path) -> None:
    latin = tmp_path / "recette.txt"
    latin.write_bytes("Crème brûlée: caramélisez le sucre à la flamme.".encode("cp1252"))
    run = cli("--add-to-vector-store", str(latin))
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("Added 1 chunk")
    assert "ocat: warning:" in run.stderr and "is not UTF-8 (byte 2); read it as Windows-1252" in run.stderr
    found = cli("--query-vector-store", "crème brûlée", "--output", "json").json()["result"]["results"]
    assert found[0]["text"] == "Crème brûlée: caramélisez le sucre à la flamme."


def test_utf16_text_with_a_bom_is_read_as_text(cli: Cli, tmp_path: Path) -> None:
    wide = tmp_path / "wide.txt"
    wide.write_bytes("Notes saved by a Windows editor.".encode("utf-16"))
    run = cli("--add-to-vector-store", str(wide), "--output", "json")
    assert run.returncode == 0, run.stderr
    found = cli("--query-vector-store", "windows editor notes", "--output", "json").json()["result"]["results"]
    assert found[0]["text"] == "Notes saved by a Windows editor."


def test_an_empty_file_adds_nothing_and_says_so(seeded: Cli, tmp_path: Path) -> None:
    empty = tmp_path / "empty.md"
    empty.write_text("  \n\n")
    run = seeded("--add-to-vector-store", str(empty))
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(f"Added 0 chunks from {empty}")
    assert f"ocat: warning: {empty} is empty; nothing to add from it" in run.stderr
    assert_kept(seeded)


def test_a_50_mb_file_streams_with_progress_and_ctrl_c_leaves_it_detectably_partial(cli: Cli, tmp_path: Path) -> None:
    # Embedding all 50 MB takes the best part of an hour on two cores (bench/big_file.py measures
    # it); here it is read, chunked, its first chunks stored with progress, then cancelled: what
    # progress said was stored is kept. Completing a cancelled add, and a stop after whole write
    # batches, are tested on smaller files in test_crashes.py.
    big = tmp_path / "big.txt"
    rng = random.Random(5)
    paragraph = " ".join(rng.choice(WORDS) for _ in range(150)) + ".\n\n"
    with big.open("w", encoding="utf-8") as handle:
        for i in range(50 * 1024 * 1024 // len(paragraph)):
            handle.write(f"{i} {paragraph}")
    assert big.stat().st_size > 50_000_000
    running = Running(cli, "--add-to-vector-store", str(big))
    progress = running.wait_until(lambda seen: stored_beyond(seen, 0), timeout=600)
    assert "big.txt: 0/" in progress  # the total, before anything was embedded
    said = max(int(done) for done in re.findall(r"big.txt: (\d+)/", progress))
    assert running.kill(signal.SIGINT) == 130
    assert "ocat: interrupted; what was stored is kept" in running.wait_for("completes it\n")
    after = stats(cli)
    assert after["partial_documents"] == 1 and after["documents"] == 1 and after["document_chunks"] >= said > 0


# -- import ------------------------------------------------------------------------------------


def test_a_bad_line_late_in_an_import_means_nothing_is_imported(seeded: Cli, tmp_path: Path) -> None:
    source = tmp_path / "memory.jsonl"
    write_exchanges(source, 300)
    with source.open("a") as handle:
        handle.write('{"kind": "exchange", "exchange_id": "x"}\n')
    run = seeded("--import-memory", str(source))
    assert_clean_failure(run, 1, f"{source}:301: exchange is missing thread_id", "nothing was imported")
    assert stats(seeded)["exchanges"] == 0
    assert_kept(seeded)


# -- the command line --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--frobnicate",), "unrecognized arguments: --frobnicate"),
        (("--vector-store-stats", "--ask", "x"), "argument --ask: not allowed with argument --vector-store-stats"),
        (("--query-vector-store", "  "), "ocat: the query is empty"),
        (("--ask", ""), "ocat: nothing to ask: the prompt is empty"),
        (("--query-vector-store", "x", "--results", "0"), '--results: must be a whole number from 1 to 1000, not "0"'),
        (("--query-vector-store", "x", "--results", "ten"), '--results: must be a whole number from 1 to 1000, not "ten"'),
        (("--results", "3"), "--results and --output apply to headless actions only"),
        (("--vector-store-stats", "--set", "llm.model"), "expected KEY=VALUE, got 'llm.model'"),
    ],
)
def test_usage_errors_say_what_is_wrong_and_exit_2(cli: Cli, args: tuple[str, ...], needle: str) -> None:
    assert_clean_failure(cli(*args), 2, needle)


@pytest.mark.parametrize(
    ("config", "args", "needle"),
    [
        ("llm:\n  temprature: 0.2\n", (), "unknown key 'llm.temprature' (did you mean 'llm.temperature'?)"),
        ("vector_store:\n  context_results: 0\n", (), "vector_store.context_results"),
        (None, ("--set", "llm.temprature=0.2"), "command line: unknown key 'llm.temprature'"),
        (None, ("--set", "vector_store.similarity_threshold=2"), "vector_store.similarity_threshold"),
        ("", ("--config", "/no/such/config.yaml"), "config file not found: /no/such/config.yaml"),
    ],
)
def test_configuration_errors_name_the_key_and_exit_3(
    seeded: Cli, tmp_path: Path, config: str | None, args: tuple[str, ...], needle: str
) -> None:
    extra: tuple[str, ...] = ()
    if config:
        path = tmp_path / "config.yaml"
        path.write_text(config)
        extra = ("--config", str(path))
        needle_file = f"{path}:2"
    run = seeded("--vector-store-stats", *extra, *args)
    assert_clean_failure(run, 3, "config error", needle)
    if config:
        assert needle_file in run.stderr
    assert_kept(seeded)


# -- the store ---------------------------------------------------------------------------------


def test_a_store_path_that_cannot_be_a_folder_is_explained(cli: Cli, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    run = cli("--vector-store-stats", env={"OCAT_VECTOR_STORE_PATH": str(blocker / "store")})
    assert_clean_failure(run, 1, f"cannot use {blocker / 'store'} as a memory store: Not a directory")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_a_read_only_store_folder_is_explained_and_left_alone(seeded: Cli) -> None:
    os.chmod(seeded.store_path, 0o555)
    try:
        run = seeded("--vector-store-stats")
        assert_clean_failure(run, 1, str(seeded.store_path))
    finally:
        os.chmod(seeded.store_path, 0o755)
    assert_kept(seeded)


def test_a_corrupt_store_is_reported_and_the_chat_goes_on_without_memory(seeded: Cli) -> None:
    database = seeded.store_path / "chroma.sqlite3"
    original = database.read_bytes()
    database.write_bytes(b"this is not an SQLite database" * 100)
    query = seeded("--query-vector-store", "gulls")
    assert_clean_failure(query, 1, f"cannot open the memory store at {seeded.store_path}", "file is not a database")
    chat = seeded("--plain", "--dummy-mode", input="hello\n/vquery gulls\n")
    assert chat.returncode == 0, chat.stderr
    assert "[dummy] You said: hello" in chat.stdout
    assert "ocat: memory is off: cannot open the memory store" in chat.stderr and "file is not a database" in chat.stderr
    assert "memory is off" in chat.stderr.splitlines()[-1]  # /vquery says so too
    assert "Traceback" not in chat.stderr
    # ocat did not touch the damaged file: restoring it restores the memory.
    assert database.read_bytes() == b"this is not an SQLite database" * 100
    database.write_bytes(original)
    assert_kept(seeded)


# -- in the chat -------------------------------------------------------------------------------


def test_unknown_ids_in_the_chat_are_errors_not_crashes(seeded: Cli, tmp_path: Path) -> None:
    script = "/vget nosuchid\n/vdelete nosuchid --yes\n/continue nosuchthread\n/vdoc /no/such/file.md\n/vquery\n"
    run = seeded("--plain", "--dummy-mode", input=script)
    assert run.returncode == 0, run.stderr
    errors = run.stderr.splitlines()
    assert errors == [
        "no memory with id nosuchid",
        "no memory with id nosuchid",
        "no thread with an id starting 'nosuchthread'; /threads lists them",
        "no such file or folder: /no/such/file.md",
        '/vquery needs a query: /vquery "what did we decide" 5',
    ]
    assert_kept(seeded)


# -- the provider ------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("failure", "needle"),
    [
        ("401", "authentication failed for openai/fake-model. Check llm.api_key."),
        ("429", "rate limited by the provider of openai/fake-model; try again shortly"),
        ("404", "unknown model 'openai/fake-model'"),
        ("timeout", "openai/fake-model did not answer within 1 s (llm.timeout_seconds)"),
        ("refused", "cannot reach http://127.0.0.1:"),
    ],
)
def test_provider_failures_are_one_line_exit_1_and_store_nothing(
    seeded: Cli, llm_server: FakeLLMServer, failure: str, needle: str
) -> None:
    api_base = llm_server.api_base
    if failure.isdigit():
        llm_server.status = int(failure)
    elif failure == "timeout":
        llm_server.stall = 5.0  # nothing comes for 5 s (--ask streams: a slow, steady answer is no timeout)
    else:
        api_base = f"http://127.0.0.1:{_free_port()}/v1"
    args = ("--model", "openai/fake-model", "--set", f"llm.api_base={api_base}", "--set", "llm.api_key=sk-test",
            "--set", "llm.timeout_seconds=1")
    run = seeded("--ask", "hello", *args, "--output", "json")
    assert_clean_failure(run, 1, needle)
    assert len(run.stderr.strip().splitlines()) == 1
    assert run.json()["error"]["type"] == "ProviderError"
    assert stats(seeded)["exchanges"] == 0
    assert_kept(seeded)
