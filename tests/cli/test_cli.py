"""The headless CLI, run as a subprocess: stdout, stderr, exit codes and the JSON shapes."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import Cli
from tests.support.fakes import FakeLLMServer
from tests.support.warm_start import python_command

NOTES = """# Project notes

We decided to use PostgreSQL for the billing ledger, because it needs real transactions.

The frontend team picked htmx over React to keep the bundle small.
"""
ENVELOPE_KEYS = {"ok", "mode", "action", "result", "error", "meta"}


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    path = tmp_path / "notes.md"
    path.write_text(NOTES)
    return path


def fake_model_args(server: FakeLLMServer) -> list[str]:
    return ["--model", "openai/fake-model", "--set", f"llm.api_base={server.api_base}", "--set", "llm.api_key=sk-test"]


def test_add_query_and_stats_on_a_fresh_machine(cli: Cli, notes: Path) -> None:
    added = cli("--add-to-vector-store", str(notes), "--output", "json")
    assert added.returncode == 0, added.stderr
    document = added.json()
    assert set(document) == ENVELOPE_KEYS
    assert document["ok"] is True and document["mode"] == "headless" and document["action"] == "add"
    assert document["result"]["source_path"] == str(notes)
    assert document["result"]["added_chunks"] >= 1
    assert set(document["meta"]) == {"duration_ms", "model", "config_path"}

    query = cli("--query-vector-store", "which database for billing?", "--output", "json")
    assert query.returncode == 0, query.stderr
    result = query.json()["result"]
    assert result["query"] == "which database for billing?"
    top = result["results"][0]
    assert {"id", "score", "excerpt", "text", "metadata"} <= set(top)
    assert "PostgreSQL" in top["text"] and 0.0 <= top["score"] <= 1.0
    assert top["metadata"]["source"] == "cli"

    stats = cli("--vector-store-stats", "--output", "json").json()["result"]
    assert stats == {
        "path": str(cli.store_path),
        "collection": "default",
        "exchanges": 0,
        "documents": 1,
        "document_chunks": document["result"]["added_chunks"],
        "embedding_model": "all-MiniLM-L6-v2",
        "dimensions": 384,
        "similarity_threshold": 0.65,
        "partial_documents": 0,
        "model_path": os.environ["OCAT_EMBEDDING_MODEL_PATH"],
        "floor": None,  # no exchanges: nothing measured
        "floor_raise": 0.0,
        "stores": ["default"],
    }


def test_text_output_is_readable_and_adding_twice_adds_nothing(cli: Cli, notes: Path) -> None:
    first = cli("--add-to-vector-store", str(notes))
    assert first.returncode == 0 and first.stdout.startswith("Added 1 chunk")
    second = cli("--add-to-vector-store", str(notes))
    assert "Added 0 chunks" in second.stdout and "1 already stored" in second.stdout
    query = cli("--query-vector-store", "htmx or react", "--results", "1")
    assert query.returncode == 0
    assert " 1. " in query.stdout and "notes.md" in query.stdout and "PostgreSQL" in query.stdout
    assert query.stderr == ""


def test_batch_queries_from_stdin_give_one_json_line_each(cli: Cli, notes: Path) -> None:
    cli("--add-to-vector-store", str(notes))
    run = cli("--query-vector-store", "-", "--output", "json", input="billing database\n\nfrontend framework\n")
    assert run.returncode == 0, run.stderr
    lines = run.json_lines()
    assert [line["result"]["query"] for line in lines] == ["billing database", "frontend framework"]
    assert all(line["meta"]["duration_ms"] > 0 for line in lines)


def test_add_a_folder(cli: Cli, tmp_path: Path) -> None:
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "one.md").write_text("first note about rust lifetimes")
    (folder / "two.txt").write_text("second note about python typing")
    (folder / "skip.csv").write_text("a,b")
    run = cli("--add-to-vector-store", str(folder), "--output", "json")
    assert run.returncode == 0, run.stderr
    assert run.json()["result"]["added_chunks"] == 2 and run.json()["result"]["files"] == 2


def test_ask_uses_memory_stores_the_exchange_and_reports_usage(cli: Cli, notes: Path, llm_server: FakeLLMServer) -> None:
    cli("--add-to-vector-store", str(notes))
    llm_server.reply = "You use PostgreSQL."
    run = cli("--ask", "what database do we use for the billing ledger?", "--output", "json", *fake_model_args(llm_server))
    assert run.returncode == 0, run.stderr
    result = run.json()["result"]
    assert result["text"] == "You use PostgreSQL."
    assert result["usage"]["prompt_tokens"] == 11 and result["usage"]["completion_tokens"] == 7
    # The memory went to the model as quoted reference material in a system message.
    sent = llm_server.requests[-1]["messages"]
    memory = [m for m in sent if m["role"] == "system" and "<memory" in m["content"]]
    assert memory and "PostgreSQL" in memory[0]["content"]
    assert sent[-1] == {"role": "user", "content": "what database do we use for the billing ledger?"}
    assert cli("--vector-store-stats", "--output", "json").json()["result"]["exchanges"] == 1
    found = cli("--query-vector-store", "billing ledger database", "--output", "json").json()["result"]["results"]
    stored = next(r for r in found if r["metadata"].get("exchange_id") == result["exchange_id"])
    assert json.loads(stored["metadata"]["prior_exchange_ids"]) == [m["id"] for m in result["memories"]]


def test_ask_reads_stdin_and_text_output_is_just_the_answer(cli: Cli, llm_server: FakeLLMServer) -> None:
    run = cli("--ask", "-", *fake_model_args(llm_server), input="hello there\n")
    assert run.returncode == 0, run.stderr
    assert run.stdout == "Hello from the fake model.\n"
    assert llm_server.requests[-1]["messages"][-1]["content"] == "hello there\n"


def test_dummy_mode_needs_no_key_and_stores_nothing(cli: Cli) -> None:
    run = cli("--ask", "ping", "--dummy-mode", "--output", "json")
    assert run.returncode == 0, run.stderr
    assert run.json()["result"]["text"].startswith("[dummy] You said: ping")
    assert run.json()["meta"]["model"] == "dummy"
    assert cli("--vector-store-stats", "--output", "json").json()["result"]["exchanges"] == 0


def test_no_vector_store_neither_reads_nor_writes_memory(cli: Cli, llm_server: FakeLLMServer) -> None:
    run = cli("--ask", "hi", "--no-vector-store", *fake_model_args(llm_server))
    assert run.returncode == 0, run.stderr
    assert not cli.store_path.exists()
    stats = cli("--vector-store-stats", "--no-vector-store")
    assert stats.returncode == 1 and "memory is disabled" in stats.stderr


@pytest.mark.parametrize(("status", "message"), [(401, "authentication failed"), (500, "fake-model")])
def test_provider_errors_are_one_line_and_exit_1(cli: Cli, llm_server: FakeLLMServer, status: int, message: str) -> None:
    llm_server.status = status
    run = cli("--ask", "hi", "--output", "json", *fake_model_args(llm_server), "--set", "llm.timeout_seconds=5")
    assert run.returncode == 1
    assert message in run.stderr and "Traceback" not in run.stderr
    assert run.json()["ok"] is False and run.json()["error"]["message"]
    assert cli("--vector-store-stats", "--output", "json").json()["result"]["exchanges"] == 0


def test_missing_credentials_say_what_to_set(cli: Cli) -> None:
    run = cli("--ask", "hi", env={"OPENAI_API_KEY": None})
    assert run.returncode == 1
    assert "OPENAI_API_KEY" in run.stderr and "--dummy-mode" in run.stderr


def test_export_then_import_into_a_new_store(cli: Cli, notes: Path, tmp_path: Path, llm_server: FakeLLMServer) -> None:
    cli("--add-to-vector-store", str(notes))
    cli("--ask", "remember that my favourite colour is teal", *fake_model_args(llm_server))
    out = tmp_path / "memory.jsonl"
    exported = cli("--export-memory", str(out), "--output", "json")
    assert exported.returncode == 0, exported.stderr
    assert exported.json()["result"]["exchanges"] == 1
    kinds = sorted(json.loads(line)["kind"] for line in out.read_text().splitlines())
    assert kinds == ["document", "exchange"]
    other = {"OCAT_VECTOR_STORE_PATH": str(tmp_path / "second-store")}
    imported = cli("--import-memory", str(out), "--output", "json", env=other)
    assert imported.returncode == 0, imported.stderr
    assert imported.json()["result"]["added"] == 2
    again = tmp_path / "again.jsonl"
    cli("--export-memory", str(again), env=other)
    records = lambda path: sorted(json.dumps(json.loads(line), sort_keys=True) for line in path.read_text().splitlines())  # noqa: E731
    assert records(out) == records(again)


def test_a_malformed_import_names_the_line_and_writes_nothing(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"kind": "document", "id": "d1", "text": "fine", "metadata": {}}\n{oops\n')
    run = cli("--import-memory", str(path))
    assert run.returncode == 1
    assert f"{path}:2:" in run.stderr and "Traceback" not in run.stderr
    assert cli("--vector-store-stats", "--output", "json").json()["result"]["documents"] == 0


@pytest.mark.parametrize(
    "args",
    [
        ("--add-to-vector-store", "/no/such/file.md"),
        ("--import-memory", "/no/such/file.jsonl"),
    ],
)
def test_missing_files_exit_1_with_a_message(cli: Cli, args: tuple[str, ...]) -> None:
    run = cli(*args, "--output", "json")
    assert run.returncode == 1
    assert "/no/such/file" in run.stderr
    assert run.json()["ok"] is False


def test_usage_errors_exit_2(cli: Cli) -> None:
    both = cli("--vector-store-stats", "--ask", "x")
    assert both.returncode == 2 and "not allowed with" in both.stderr
    assert cli("--results", "0", "--vector-store-stats").returncode == 2
    assert cli("--frobnicate").returncode == 2
    bad_set = cli("--vector-store-stats", "--set", "llm.model")
    assert bad_set.returncode == 2 and "KEY=VALUE" in bad_set.stderr
    empty = cli("--query-vector-store", "  ")
    assert empty.returncode == 2 and "empty" in empty.stderr


def test_configuration_errors_exit_3(cli: Cli, tmp_path: Path) -> None:
    missing = cli("--vector-store-stats", "--config", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 3 and "nope.yaml" in missing.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("vector_store:\n  similarity_threshold: 1.5\n")
    run = cli("--vector-store-stats", "--config", str(bad), "--output", "json")
    assert run.returncode == 3
    assert "vector_store.similarity_threshold" in run.stderr and f"{bad}:2" in run.stderr
    assert run.json()["error"]["exit_code"] == 3
    env_bad = cli("--vector-store-stats", env={"OCAT_VECTOR_STORE_CONTEXT_RESULTS": "many"})
    assert env_bad.returncode == 3 and "OCAT_VECTOR_STORE_CONTEXT_RESULTS" in env_bad.stderr


def test_an_old_key_name_is_said_once_on_stderr_naming_the_new_one_and_the_command_runs(
    cli: Cli, tmp_path: Path
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("memory:\n  wake_threads: 2\n")
    read = "(the old name is read for this release only)"
    # --store loads the configuration twice (ocat.cli.dispatch.configured_store): still one line.
    run = cli("--fetch-model", "--config", str(config), "--store", "other", "--set",
              "embedding.model=text-embedding-3-small", "--output", "json")
    assert run.returncode == 0 and run.json()["ok"] is True, run.stderr
    assert run.stderr.splitlines() == [f"ocat: config: {config}:2: 'memory.wake_threads' is deprecated, it is now "
                                       f"'wake.threads' {read}"]
    line_mode = cli("--plain", "--dummy-mode", "--no-vector-store", env={"OCAT_MEMORY_WAKE": "false"})
    assert line_mode.returncode == 0, line_mode.stderr
    said = [line for line in line_mode.stderr.splitlines() if "deprecated" in line]
    assert said == [f"ocat: config: OCAT_MEMORY_WAKE is deprecated, it is now OCAT_WAKE_ENABLED {read}"]
    mcp = cli("mcp", "--set", "memory.profile=me.md", "--set", "vector_store.enabled=false")
    assert mcp.returncode == 2 and mcp.stderr.splitlines() == [
        f"ocat mcp: config: command line: 'memory.profile' is deprecated, it is now 'wake.profile' {read}",
        "ocat mcp: memory is disabled (vector_store.enabled is false): there is nothing to serve",
    ]
    both = cli("--fetch-model", "--set", "memory.wake=true", "--set", "wake.enabled=false")
    assert both.returncode == 3 and "'wake.enabled' is given twice" in both.stderr


def test_flags_beat_env_which_beats_the_config_file(cli: Cli, tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("llm:\n  model: from-file\n")
    args = ("--ask", "x", "--dummy-mode", "--config", str(config), "--output", "json")
    assert cli(*args).json()["meta"]["config_path"] == str(config)
    stats = ("--vector-store-stats", "--config", str(config), "--output", "json")
    assert cli(*stats).json()["meta"]["model"] == "from-file"
    assert cli(*stats, env={"OCAT_LLM_MODEL": "from-env"}).json()["meta"]["model"] == "from-env"
    assert cli(*stats, "--model", "from-flag", env={"OCAT_LLM_MODEL": "from-env"}).json()["meta"]["model"] == "from-flag"


def test_a_store_built_with_another_model_is_refused(cli: Cli, notes: Path) -> None:
    cli("--add-to-vector-store", str(notes))
    run = cli("--vector-store-stats", "--set", "embedding.model=text-embedding-3-small", "--set", "embedding.dimensions=1536")
    assert run.returncode == 1
    assert "all-MiniLM-L6-v2" in run.stderr and "--export-memory" in run.stderr


def test_a_missing_embedding_model_is_explained(cli: Cli, tmp_path: Path, notes: Path) -> None:
    run = cli("--add-to-vector-store", str(notes), env={"OCAT_EMBEDDING_MODEL_PATH": str(tmp_path / "none")})
    assert run.returncode == 1
    assert "OCAT_EMBEDDING_MODEL_PATH" in run.stderr and "Traceback" not in run.stderr


def test_version_and_help_and_python_dash_m(cli: Cli) -> None:
    version = cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("ocat ")
    helped = cli("--help")
    assert helped.returncode == 0 and "--query-vector-store" in helped.stdout and "Exit codes" in helped.stdout
    assert "`ocat mcp` serves the same memory to MCP clients" in " ".join(helped.stdout.split())


@pytest.mark.parametrize(
    ("code", "forbidden"),
    [
        ("import ocat.cli.dispatch", ("textual", "litellm", "chromadb")),
        ("import ocat.cli.dispatch, ocat.config.loading, ocat.memory, ocat.chat.messages, ocat.headless.actions", ("textual", "litellm", "chromadb")),
        ("import ocat.chat.session, ocat.commands, ocat.repl", ("textual", "litellm", "chromadb")),
        (
            "import ocat.mcp_server.tools, ocat.operations.search, ocat.memory.retrieval.across_stores, ocat.memory.ingest.folders, ocat.memory.named_stores",
            ("textual", "litellm", "chromadb", "mcp"),
        ),
        # `ocat mcp` loads the SDK when it builds the server, never at import.
        ("import ocat.mcp_server", ("textual", "litellm", "chromadb", "mcp")),
        # The app itself may import Textual, but the heavy libraries load after the first frame.
        ("import ocat.ui.app", ("litellm", "chromadb", "onnxruntime")),
    ],
)
@pytest.mark.slow
def test_the_core_imports_without_heavy_libraries(code: str, forbidden: tuple[str, ...]) -> None:
    check = f"{code}; import sys; print([m for m in {forbidden!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_stats_never_imports_litellm(cli: Cli) -> None:
    code = (
        "import sys, runpy\n"
        "sys.argv = ['ocat', '--vector-store-stats']\n"
        "from ocat.cli.dispatch import main\n"
        "code = main()\n"
        "print('LITELLM' if 'litellm' in sys.modules else 'CLEAN', code)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cli.home,
                         env={**__import__("os").environ, "OCAT_VECTOR_STORE_PATH": str(cli.store_path)})
    assert run.stdout.strip().splitlines()[-1] == "CLEAN 0", run.stderr


def test_export_to_a_closed_pipe_stops_quietly(cli: Cli, tmp_path: Path) -> None:
    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(4):
        (folder / f"n{i}.txt").write_text(f"note number {i} " + "filler words " * 3000)
    # Each note one chunk: 160 KB to export, well past a pipe's 64 KB, while the model reads only
    # each chunk's first 256 tokens (4 windows embedded, not 320).
    added = cli("--add-to-vector-store", str(folder), "--set", "chunking.chunk_size=40000",
                "--set", "chunking.max_chunk_size=40000", "--output", "json")
    assert added.json()["result"]["added_chunks"] == 4, added.stderr
    # The export from the worker's warm interpreter (tests/support/warm_start.py): its run writes
    # to the pipe itself and its status is the launcher's; a cold one cost ~2.5 s of CPU here.
    env = cli.environ()
    export = shlex.join(python_command("-m", "ocat", "--export-memory", "-", env=env))
    pipeline = f"{export} | head -c 10; echo; echo status=${{PIPESTATUS[0]}}"
    run = subprocess.run(["bash", "-c", pipeline], capture_output=True, text=True, cwd=cli.home, env=env)
    assert "status=0" in run.stdout
    assert "Traceback" not in run.stderr and "BrokenPipe" not in run.stderr


def test_re_adding_an_edited_file_reports_the_replaced_chunks(cli: Cli, notes: Path) -> None:
    cli("--add-to-vector-store", str(notes))
    notes.write_text("Everything changed: we now use SQLite.")
    run = cli("--add-to-vector-store", str(notes), "--output", "json")
    assert run.json()["result"]["replaced_chunks"] == 1 and run.json()["result"]["added_chunks"] == 1
    assert cli("--vector-store-stats", "--output", "json").json()["result"]["documents"] == 1


def test_stats_count_documents_and_their_chunks_and_say_what_the_floor_is(cli: Cli, tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    for name in ("plan.md", "risks.md"):
        sections = [f"## Part {i}\n\n" + f"{name} part {i} says something of its own. " * 12 for i in range(4)]
        (folder / name).write_text("\n\n".join(sections))
    added = cli("--add-to-vector-store", str(folder), "--output", "json")
    assert added.returncode == 0, added.stderr
    chunks = added.json()["result"]["added_chunks"]
    assert chunks > 2
    result = cli("--vector-store-stats", "--output", "json").json()["result"]
    assert (result["documents"], result["document_chunks"]) == (2, chunks)
    assert result["floor"] is None  # JSON keeps the data: null until measured
    text = cli("--vector-store-stats").stdout
    assert f"documents: 2\ndocument_chunks: {chunks}\n" in text
    # One wording for "not measured" in every face, and what floor and floor_raise mean.
    assert "floor: not measured yet\n" in text and "None" not in text
    assert "floor: how strongly everyday, generic questions match" in text and "floor_raise: how much" in text
    assert "config: none (the shipped defaults; yours would be " in text
