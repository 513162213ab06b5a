"""A new user's first run: the model is fetched on first need by the chat, the line mode and the
CLI, what is said meanwhile is remembered once it arrives, and without it every face says
what to do while the commands that need no embedding keep working."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable

from ocat.memory.embedding.model_files import chroma_model_dir
from ocat.ui.memory_view import MemoryState, MemoryStatus
from ocat.ui.widgets import PromptInput, TaskProgress
from tests.support import CLOSED_URL, MODEL_DIR
from tests.support.cli import Cli
from tests.support.fakes import FakeLLMServer
from tests.support.model_server import (
    FETCH_COMMAND,
    OFFLINE_URL,
    ArchiveServer,
    assert_names_the_ways_without_internet,
    assert_nothing_left,
    assert_same_files,
    served_env,
)
from tests.support.pilot import make_app, notices, send, wait_for


def first_run(monkeypatch: pytest.MonkeyPatch, url: str, sha256: str | None = None) -> None:
    """No model anywhere, and downloads from `url`, as on a machine that never ran ocat."""
    monkeypatch.delenv("OCAT_EMBEDDING_MODEL_PATH")
    monkeypatch.setenv("OCAT_EMBEDDING_DOWNLOAD_URL", url)
    if sha256:
        monkeypatch.setenv("OCAT_EMBEDDING_DOWNLOAD_SHA256", sha256)


# The full-screen chat


@pytest.mark.anyio
@pytest.mark.slow
async def test_the_chat_downloads_the_model_shows_progress_and_remembers_what_was_said_meanwhile(
    monkeypatch: pytest.MonkeyPatch, server: ArchiveServer, llm_server: FakeLLMServer
) -> None:
    first_run(monkeypatch, server.url("gated"), server.archive.sha256)
    app = make_app(llm_server)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.memory_view.state is MemoryState.DOWNLOADING, "the download", seconds=30)
        assert "downloading model" in str(app.query_one("#header").render())
        assert app.query(TaskProgress)
        # The chat answers while the model downloads; the exchange waits for memory.
        await send(app, pilot, "my sister's dog is called Biscuit")
        assert [e.user_prompt for e in app.session.session_memory.unsaved] == ["my sister's dog is called Biscuit"]
        # Commands that need no embedding work meanwhile; a search says why it must wait.
        await send(app, pilot, "/vquery dog")
        await wait_for(pilot, lambda: any("still downloading" in n for n in notices(app)), "the /vquery answer")
        server.gate.set()
        await wait_for(pilot, lambda: app.memory_view.status == MemoryStatus(MemoryState.READY, exchanges=1), "memory ready", seconds=30)
        assert not app.query(TaskProgress)
        assert any("Downloaded the embedding model" in n and "remembered too" in n for n in notices(app))
        assert app.session.session_memory.unsaved == []
        stored = app.session.session_memory.store.get_session(app.session.session_id)
        assert [e.user_prompt for e in stored] == ["my sister's dog is called Biscuit"]
    assert_same_files(chroma_model_dir())


@pytest.mark.anyio
@pytest.mark.slow
async def test_without_the_model_the_chat_says_what_to_do_and_picks_the_model_up_once_fetched(
    monkeypatch: pytest.MonkeyPatch, llm_server: FakeLLMServer
) -> None:
    import shutil

    first_run(monkeypatch, CLOSED_URL)
    app = make_app(llm_server)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.memory_view.state is MemoryState.OFF, "memory off", seconds=30)
        [notice] = [n for n in notices(app) if "Memory is off" in n]
        assert FETCH_COMMAND in notice and "embedding.model_path" in notice
        await send(app, pilot, "/vstats")
        await wait_for(pilot, lambda: notices(app)[-1] == "Memory", "/vstats")  # its table's title, not an error
        assert [str(cell) for cell in app.query(DataTable).last().get_row_at(2)] == ["exchanges", "0"]
        await send(app, pilot, "first words")
        assert "memory off" in str(app.query_one("#header").render())
        # `ocat --fetch-model` in another terminal (or a copy put in place): the next turn finds it.
        shutil.copytree(MODEL_DIR, chroma_model_dir())
        await send(app, pilot, "second words")
        assert app.memory_view.status == MemoryStatus(MemoryState.READY, exchanges=2)
        stored = app.session.session_memory.store.get_session(app.session.session_id)
        assert [e.user_prompt for e in stored] == ["first words", "second words"]


# The line mode and --ask


def test_the_line_mode_fetches_the_model_with_progress_on_stderr_and_remembers(
    cli: Cli, server: ArchiveServer, llm_server: FakeLLMServer
) -> None:
    model = {"OCAT_LLM_MODEL": "openai/fake", "OCAT_LLM_API_BASE": llm_server.api_base, "OCAT_LLM_API_KEY": "sk-t"}
    done = cli(input="remember that the boiler is serviced in May\n", env=served_env(server) | model)

    assert done.returncode == 0, done.stderr
    assert "Downloaded" not in done.stdout and "downloading" not in done.stdout
    assert "downloading the embedding model" in done.stderr and "Traceback" not in done.stderr
    stats = cli("--vector-store-stats", "--output", "json", env=served_env(server)).json()["result"]
    assert stats["exchanges"] == 1 and stats["model_path"] == str(chroma_model_dir())


def test_ask_without_the_model_answers_and_says_memory_is_off(cli: Cli, llm_server: FakeLLMServer) -> None:
    model = {"OCAT_LLM_MODEL": "openai/fake", "OCAT_LLM_API_BASE": llm_server.api_base, "OCAT_LLM_API_KEY": "sk-t"}
    offline = {"OCAT_EMBEDDING_MODEL_PATH": None, "OCAT_EMBEDDING_DOWNLOAD_URL": CLOSED_URL}
    done = cli("--ask", "hello", env=offline | model)

    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{llm_server.reply}\n"
    assert "memory is off" in done.stderr and FETCH_COMMAND in done.stderr


# The CLI


def test_after_fetch_model_the_test_suite_finds_the_model_where_ocat_keeps_it(
    cli: Cli, server: ArchiveServer, tmp_path: Path
) -> None:
    from tests.support import find_model_dir

    clone = tmp_path / "clone" / "ocat"  # a fresh clone: no ../shared/models beside it
    clone.mkdir(parents=True)
    assert not (find_model_dir({}, clone, cli.home) / "model.onnx").exists()
    done = cli("--fetch-model", env=served_env(server))
    assert done.returncode == 0, done.stderr
    assert find_model_dir({}, clone, cli.home) == chroma_model_dir() == Path(done.stdout.strip())
    # A folder named by OCAT_EMBEDDING_MODEL_PATH comes first, then the shared one.
    assert find_model_dir({"OCAT_EMBEDDING_MODEL_PATH": "/models/mini"}, clone, cli.home) == Path("/models/mini")
    shared = tmp_path / "clone" / "shared" / "models" / "all-MiniLM-L6-v2-int8"
    shared.mkdir(parents=True)
    (shared / "model.onnx").write_bytes(b"")
    assert find_model_dir({}, clone, cli.home) == shared


def test_cli_fetch_model_prints_the_folder_and_keeps_progress_on_stderr(cli: Cli, server: ArchiveServer) -> None:
    done = cli("--fetch-model", env=served_env(server))

    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{chroma_model_dir()}\n"
    assert "downloading the embedding model" in done.stderr
    assert "Downloaded the embedding model" in done.stderr
    assert "Traceback" not in done.stderr
    assert_same_files(chroma_model_dir())

    again = cli("--fetch-model", env=served_env(server))
    assert again.returncode == 0, again.stderr
    assert "is ready in" in again.stdout and again.stderr == ""
    assert len(server.requests) == 1


def test_cli_fetch_model_json_is_one_document(cli: Cli, server: ArchiveServer) -> None:
    done = cli("--fetch-model", "--output", "json", env=served_env(server))

    assert done.returncode == 0, done.stderr
    document = done.json()  # fails unless stdout is exactly one JSON document
    assert document["ok"] is True and document["action"] == "fetch-model"
    assert document["result"]["path"] == str(chroma_model_dir())
    assert document["result"]["downloaded_bytes"] == len(server.archive.data) > 0
    assert "downloading the embedding model" in done.stderr


def test_cli_fetch_model_unreachable_is_one_clear_line(cli: Cli) -> None:
    done = cli("--fetch-model", env={"OCAT_EMBEDDING_MODEL_PATH": None, "OCAT_EMBEDDING_DOWNLOAD_URL": CLOSED_URL})

    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("ocat: ") and FETCH_COMMAND in lines[0]
    assert "Traceback" not in done.stderr
    assert_nothing_left(chroma_model_dir())


def test_cli_fetch_model_offline_names_the_ways_that_need_no_internet(cli: Cli) -> None:
    done = cli("--fetch-model", env={"OCAT_EMBEDDING_MODEL_PATH": None, "OCAT_EMBEDDING_DOWNLOAD_URL": OFFLINE_URL})

    assert done.returncode == 1 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("ocat: ") and "is this machine offline" in line
    assert_names_the_ways_without_internet(line)  # not "Retry with `ocat --fetch-model`", the command just run
    assert_nothing_left(chroma_model_dir())


def test_cli_stats_need_no_model(cli: Cli) -> None:
    done = cli(
        "--vector-store-stats",
        "--output",
        "json",
        env={"OCAT_EMBEDDING_MODEL_PATH": None, "OCAT_EMBEDDING_DOWNLOAD_URL": CLOSED_URL},
    )

    assert done.returncode == 0, done.stderr
    assert done.json()["ok"] is True
    assert not chroma_model_dir().exists()


def test_cli_query_downloads_the_model_first_then_answers(cli: Cli, server: ArchiveServer) -> None:
    done = cli("--query-vector-store", "hello", "--output", "json", env=served_env(server))

    assert done.returncode == 0, done.stderr
    document = done.json()
    assert document["ok"] is True
    assert document["result"] == {"query": "hello", "results": []}
    assert "downloading the embedding model" in done.stderr
    assert "Downloaded the embedding model" in done.stderr
    assert server.requests == ["/onnx.tar.gz"]
    assert_same_files(chroma_model_dir())


def test_snapshot_the_chat_while_the_model_downloads(
    snap_compare: Any, monkeypatch: pytest.MonkeyPatch, server: ArchiveServer
) -> None:
    first_run(monkeypatch, server.url("gated"), server.archive.sha256)

    async def settle(pilot: Any) -> None:
        app = pilot.app
        app.query_one(PromptInput).cursor_blink = False
        # The gated route holds the download at its half: the picture is the same every time.
        # 49% is the last step shown before the gate (the bar moves once a percent), as the picture shows.
        await wait_for(pilot, lambda: app.memory_view.status.percent == 49, "half the download", seconds=30)
        await pilot.pause()
        # Once the picture is taken, the rest of the archive is sent: the app then ends at once,
        # instead of waiting for the held download to time out (NETWORK_TIMEOUT, 15 s).
        screenshot = app.export_screenshot

        def then_open_the_gate(*args: Any, **kwargs: Any) -> str:
            picture = screenshot(*args, **kwargs)
            server.gate.set()
            return picture

        app.export_screenshot = then_open_the_gate

    assert snap_compare(make_app(dummy=True), terminal_size=(80, 24), run_before=settle)


# What works without the model


def test_commands_that_need_no_embedding_work_without_the_model(
    monkeypatch: pytest.MonkeyPatch, real_embedder: Any
) -> None:
    from ocat.commands import run_command
    from ocat.config.loading import load_settings
    from ocat.memory import MemoryStore, StoreLocation
    from ocat.records import Exchange
    from ocat.chat.session import ChatSession

    first_run(monkeypatch, CLOSED_URL)
    settings = load_settings()
    # A thread from an earlier session, stored while the model was there.
    old = Exchange(user_prompt="plan the garden", assistant_response="tomatoes first",
                   thread_id="garden-thread", session_id="old-session")
    MemoryStore.open(StoreLocation(path=settings.store_path), real_embedder).add_exchange(old)

    session = ChatSession(settings)
    assert session.session_memory.open(serve=False)
    assert session.session_memory.ready_model() is None and FETCH_COMMAND in (session.session_memory.error or "")
    for line in ("/vstats", f"/vget {old.exchange_id[:8]}", "/threads", "/continue garden-thread"):
        result = run_command(session, line)
        assert not result.error, f"{line}: {result.text}"
    assert [e.user_prompt for e in session.history] == ["plan the garden"]
    for line in ("/vquery garden", "/vadd remember this"):
        result = run_command(session, line)
        assert result.error and "memory is off" in result.text and FETCH_COMMAND in result.text, line
    assert not run_command(session, f"/vdelete {old.exchange_id} --yes").error
    assert session.session_memory.store.count("exchange") == 0
    assert not chroma_model_dir().exists()


def test_export_needs_no_model(cli: Cli, tmp_path: Any) -> None:
    offline = {"OCAT_EMBEDDING_MODEL_PATH": None, "OCAT_EMBEDDING_DOWNLOAD_URL": CLOSED_URL}
    done = cli("--export-memory", str(tmp_path / "memory.jsonl"), env=offline)

    assert done.returncode == 0, done.stderr
    assert "Exported 0 exchanges and 0 document chunks to" in done.stdout and done.stderr == ""
    assert not chroma_model_dir().exists()
