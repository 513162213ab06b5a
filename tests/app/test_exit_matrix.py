"""No way out loses an answer: after any exit but SIGKILL, an answer shown in full is in the store
or in unsaved/, and the next start writes it, once (issue 44, "No exit path loses an answer").

The matrix: the exits of each face (the window: Ctrl+Q, Ctrl+D, /quit, SIGTERM, SIGHUP; the line
mode: Ctrl+C, /quit, end of input, SIGTERM, SIGHUP), at the moments that lost answers (during the
write, while memory loads, while the store is busy), with short and long answers. The race is
made certain, not timed: a hook holds the store's write until the exit has happened.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from ocat.errors import StoreError
from tests.support.cli import Cli, Running, stats
from tests.support.fakes import FakeLLMServer
from tests.support.warm_start import python_command

SHORT = "Noted: the spare key is under the blue pot."
LONG = " ".join(f"word{n}" for n in range(3000)) + " and the spare key is under the blue pot."
# The window renders each streamed piece as Markdown: 3,000 words take it two minutes under Pilot.
WINDOW_LONG = " ".join(f"word{n}" for n in range(300)) + " and the spare key is under the blue pot."
PROMPT = "where is the spare key?"


def kept_files(home: Path) -> list[Path]:
    """The kept files (ocat.chat.unsaved) under a test's state folder."""
    return sorted((home / ".local" / "state" / "ocat" / "unsaved").glob("*/*.jsonl"))


def kept_prompts(home: Path) -> list[str]:
    """The prompts of every exchange kept in a file."""
    return [json.loads(line)["user_prompt"] for path in kept_files(home)
            for line in path.read_text().splitlines() if line.strip()]


def wait_until(holds: Any, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not holds():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.05)


# -- the line mode, as a process: real signals, a real end of input ------------------------------

# Runs ocat with the store's write held: "write" holds it until the test creates `release` (the exit
# happens meanwhile), "busy" refuses it as a locked SQLite database does, so the exchange waits.
HOOKED = r"""
import pathlib, sys, time
from ocat.errors import StoreError
from ocat.memory import MemoryStore

marks, moment = pathlib.Path(sys.argv[1]), sys.argv[2]
real = MemoryStore.add_exchanges

def held(self, exchanges, **options):
    exchanges = list(exchanges)
    if moment == "busy":
        raise StoreError("database is locked")
    (marks / "writing").write_text("yes")
    while not (marks / "release").exists():
        time.sleep(0.02)
    return real(self, exchanges, **options)

MemoryStore.add_exchanges = held
sys.argv = ["ocat", *sys.argv[3:]]
from ocat.cli.dispatch import run
run()
"""


LINE_EXITS = ["ctrl-c", "/quit", "end of input", "SIGTERM", "SIGHUP"]


def matrix(hows: list[str], moments: list[str], answers: dict[str, str], skip: Any) -> list[Any]:
    """Every (exit, moment, answer), with the rows `skip(how, moment, answer)` names (a reason)
    skipped before their fixtures start (a server, a HOME: half a second each, for nothing)."""
    rows = []
    for answer_id, answer in answers.items():
        for moment in moments:
            for how in hows:
                reason = skip(how, moment, answer)
                rows.append(pytest.param(how, moment, answer, id=f"{how}-{moment}-{answer_id}",
                                         marks=[pytest.mark.skip(reason=reason)] if reason else []))
    return rows


def chat_args(server: FakeLLMServer) -> list[str]:
    return ["--plain", "--model", "openai/fake-model", "--set", f"llm.api_base={server.api_base}",
            "--set", "llm.api_key=sk-test"]


def leave_line_mode(chat: Running, how: str) -> None:
    if how == "ctrl-c":
        os.kill(chat.pid, signal.SIGINT)
    elif how == "SIGTERM":
        os.kill(chat.pid, signal.SIGTERM)
    elif how == "SIGHUP":
        os.kill(chat.pid, signal.SIGHUP)
    elif how == "/quit":
        chat.send("/quit")
    else:
        assert chat.process.stdin is not None
        chat.process.stdin.close()


@pytest.mark.slow
@pytest.mark.parametrize(("how", "moment", "answer"), matrix(
    LINE_EXITS, ["write", "busy"], {"short": SHORT, "long": LONG},
    lambda how, moment, answer: answer is LONG and moment == "busy" and how not in ("SIGTERM", "ctrl-c") and (
        "the long answer is run at the write, and where the break was (B3, B4): it weighs on nothing else")))
def test_the_line_mode_keeps_the_answer_on_every_way_out(
    cli: Cli, llm_server: FakeLLMServer, tmp_path: Path, how: str, moment: str, answer: str
) -> None:
    llm_server.reply = answer
    marks = tmp_path / "marks"
    marks.mkdir()
    chat = Running(cli, str(marks), moment, *chat_args(llm_server), stdin=True, script=HOOKED)
    try:
        chat.send(PROMPT)
        if moment == "write":
            wait_until(lambda: (marks / "writing").exists(), "the write started")
            leave_line_mode(chat, how)
            if how in ("ctrl-c", "SIGTERM", "SIGHUP"):
                # The exit has happened and the write has not landed: the exchange is in a file already.
                chat.wait_for("leaving once this exchange is written")
                assert kept_prompts(cli.home) == [PROMPT]
            (marks / "release").write_text("go")
        else:
            chat.wait_for("not written to memory yet")
            leave_line_mode(chat, how)
        code = chat.process.wait(timeout=120)
    finally:
        (marks / "release").write_text("go")
        if chat.process.poll() is None:
            chat.kill()
    stderr = chat.said("stderr")
    assert code in {"ctrl-c": (0, 130), "SIGTERM": (143,), "SIGHUP": (129,)}.get(how, (0,)), stderr
    assert "Traceback" not in stderr
    # In the store or in unsaved/: with no kept file, the count below (the query writes nothing) says the store.
    kept = kept_prompts(cli.home)
    assert kept in ([], [PROMPT]), stderr
    if moment == "busy":
        assert kept == [PROMPT] and "kept in ~/.local/state/ocat/unsaved/" in stderr

    # The next start, any face: a query writes what was kept, once, and finds it.
    found = cli("--query-vector-store", PROMPT, "--output", "json")
    assert found.returncode == 0, found.stderr
    assert "blue pot" in found.stdout
    assert stats(cli)["exchanges"] == 1 and kept_files(cli.home) == []


def test_a_signal_while_the_writer_starts_still_waits_for_the_write(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """CI found SIGHUP handled inside `Thread.start()` (the writer was at the store before start
    returned, on a busy machine): the exit then skipped the wait and its words. Made certain here:
    start() starts the writer, then raises as the signal's handler does."""
    from types import SimpleNamespace

    from ocat import repl

    released, written = threading.Event(), threading.Event()

    def finish() -> None:
        released.wait(5)
        written.set()

    class SignalledAtStart(threading.Thread):
        def start(self) -> None:
            super().start()
            released.set()  # the write ends during the wait below: the exit waited for it
            raise SystemExit(129)

    monkeypatch.setattr(repl.threading, "Thread", SignalledAtStart)
    kept = tmp_path / "kept.jsonl"
    turn = SimpleNamespace(finish=finish, session_memory=SimpleNamespace(spool=lambda: SimpleNamespace(path=kept)))
    err = io.StringIO()
    with pytest.raises(SystemExit):
        repl._finish(turn, err)  # type: ignore[arg-type]
    assert written.is_set()
    assert "leaving once this exchange is written to memory" in err.getvalue()


@pytest.mark.slow
def test_a_query_writes_what_an_earlier_chat_kept(cli: Cli, llm_server: FakeLLMServer, tmp_path: Path) -> None:
    """The docs say the next start on the store, any face, writes the kept file: `--query-vector-store` did not."""
    llm_server.reply = SHORT
    marks = tmp_path / "marks"
    marks.mkdir()
    chat = Running(cli, str(marks), "busy", *chat_args(llm_server), stdin=True, script=HOOKED)
    chat.send(PROMPT)
    chat.wait_for("not written to memory yet")
    chat.send("/quit")
    assert chat.process.wait(timeout=120) == 0
    assert kept_prompts(cli.home) == [PROMPT]
    found = cli("--query-vector-store", PROMPT, "--output", "json")
    assert found.returncode == 0, found.stderr
    assert "1 exchange kept by an earlier chat was written to memory" in found.stderr
    assert "blue pot" in found.stdout and kept_files(cli.home) == []


@pytest.mark.slow
def test_ask_keeps_its_exchange_on_sigterm_during_the_write(cli: Cli, llm_server: FakeLLMServer, tmp_path: Path) -> None:
    llm_server.reply = SHORT
    marks = tmp_path / "marks"
    marks.mkdir()
    ask = Running(cli, str(marks), "write", "--ask", PROMPT, *chat_args(llm_server)[1:], script=HOOKED)
    try:
        wait_until(lambda: (marks / "writing").exists(), "the write started")
        assert ask.kill(signal.SIGTERM) == 143
    finally:
        (marks / "release").write_text("go")
    stderr = ask.said("stderr")
    assert kept_prompts(cli.home) == [PROMPT], stderr
    assert "kept in ~/.local/state/ocat/unsaved/" in stderr
    found = cli("--query-vector-store", PROMPT, "--output", "json")
    assert "1 exchange kept by an earlier chat was written to memory" in found.stderr
    assert stats(cli)["exchanges"] == 1 and kept_files(cli.home) == []


# -- the window in a process of its own, ended as `ocat` ends it (os._exit) -------------------------

# The window, driven by Pilot, with the store's write held for good (a slow disk, a big store, a
# busy machine: the attacker's B2); Ctrl+Q, then ocat's own end (ocat.process_end.leave_now).
WINDOW_QUIT = r"""
import asyncio, sys, threading
from ocat import process_end
from ocat.config.loading import load_settings
from ocat.chat.session import ChatSession
from ocat.memory import MemoryStore
from ocat.ui.app import OcatApp

process_end.KEEP_WAIT_SECONDS = 1.0  # the held write never lands: no need to wait the full while
started = threading.Event()

def held(self, exchanges, **options):
    started.set()
    threading.Event().wait()  # for good

async def main():
    settings = load_settings(overrides={"llm.model": "openai/fake-model", "llm.api_base": sys.argv[1],
                                        "llm.api_key": "sk-test"})
    app = OcatApp(ChatSession(settings), serve=False, quick_exit=True)  # as `ocat` runs it
    async with app.run_test(size=(100, 30)) as pilot:
        while app.memory_view.state.pending:
            await pilot.pause(0.05)
        MemoryStore.add_exchanges = held
        app.query_one("#prompt").text = sys.argv[2]
        await pilot.press("enter")
        while not started.is_set():
            await pilot.pause(0.05)
        await pilot.press("ctrl+q")
    return app

app = asyncio.run(main())
process_end.leave_now(app.return_value or 0, app.memory_view.closing, app.session)
"""


@pytest.mark.slow
def test_ctrl_q_while_the_answer_is_written_keeps_it_and_says_so(cli: Cli, llm_server: FakeLLMServer) -> None:
    """B2: the exit waited 0.2 s when nothing was unsaved, and the exchange being written was on no list."""
    llm_server.reply = WINDOW_LONG
    environ = cli.environ()
    run = subprocess.run(python_command("-c", WINDOW_QUIT, llm_server.api_base, PROMPT, env=environ),
                         capture_output=True, text=True, env=environ, cwd=cli.home, timeout=180)
    assert run.returncode == 0, run.stderr
    assert "writing 1 exchange to memory before leaving (up to 1 s; kept in ~/.local/state/ocat/unsaved/" in run.stderr
    assert "1 exchange of this chat could not be written to memory: kept in" in run.stderr
    assert kept_prompts(cli.home) == [PROMPT]
    found = cli("--query-vector-store", PROMPT, "--output", "json")
    assert "1 exchange kept by an earlier chat was written to memory" in found.stderr
    assert stats(cli)["exchanges"] == 1 and kept_files(cli.home) == []


# -- the window, driven by Pilot: its keys, and the signals sent to this process ---------------------

# Ctrl+C during the write quits as Ctrl+Q does: the answer is in, there is nothing left to cancel
# (before, it cancelled the window's own last steps, and the window stayed open).
WINDOW_EXITS = ["ctrl+q", "ctrl+c", "ctrl+d", "/quit", "SIGTERM", "SIGHUP"]


class HeldWrite:
    """The store's exchange writes, held until `released` (then written, or refused with `fail`)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.released = threading.Event()
        self.fail = False

    def install(self, hooks: pytest.MonkeyPatch) -> None:
        from ocat.memory import MemoryStore

        real = MemoryStore.add_exchanges

        def held(store: MemoryStore, exchanges: Any, **options: Any) -> int:
            exchanges = list(exchanges)
            self.started.set()
            self.released.wait(60)
            if self.fail:
                raise StoreError("the disk is full")
            return real(store, exchanges, **options)

        hooks.setattr(MemoryStore, "add_exchanges", held)


async def leave_window(app: Any, pilot: Any, how: str, held: HeldWrite) -> None:
    from ocat.ui.widgets import PromptInput

    if how in ("SIGTERM", "SIGHUP"):
        os.kill(os.getpid(), getattr(signal, how))
    elif how == "/quit":
        app.query_one(PromptInput).text = "/quit"
        await pilot.press("enter")
        # Typed during the write, /quit waits for the answer's turn to end, as any prompt does:
        # the write is let go (to land or to fail) and the window then closes.
        held.released.set()
    else:
        app.query_one(PromptInput).text = ""
        await pilot.press(how)
    for _ in range(200):
        if app.memory_view.closing is not None:
            return
        await pilot.pause(0.05)
    raise AssertionError(f"{how} did not close the window")


@pytest.fixture
def signals_kept_in_this_process() -> Iterator[None]:
    """SIGTERM and SIGHUP sent to the test's own process reach the window's handlers only; without
    them (before the fix) they would do nothing here, instead of ending pytest."""
    before = {sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGTERM, signal.SIGHUP)}
    yield
    for sig, handler in before.items():
        signal.signal(sig, handler)


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize(("how", "moment", "answer"), matrix(
    WINDOW_EXITS, ["write", "write that fails", "memory loading", "store busy"], {"short": SHORT, "long": WINDOW_LONG},
    lambda how, moment, answer: answer is WINDOW_LONG and moment != "write" and (
        "the long answer is run at the write, where its size would weigh")))
async def test_the_window_keeps_the_answer_on_every_way_out(
    llm_server: FakeLLMServer, tmp_path: Path, signals_kept_in_this_process: None, how: str, moment: str, answer: str,
) -> None:
    from filelock import FileLock

    from ocat import process_end
    from ocat.chat import turn_inputs
    from ocat.chat.session import ChatSession
    from ocat.chat.session_memory import SessionMemory
    from ocat.memory.sharing.owner_lock import LOCK_FILE
    from tests.support.pilot import make_app, memory_ready, send

    hooks = pytest.MonkeyPatch()  # undone before the next start (the test's HOME stays)
    hooks.setattr(process_end, "KEEP_WAIT_SECONDS", 0.5)  # the exit gives up on the held write soon
    hooks.setattr(turn_inputs, "WAKE_WAIT_SECONDS", 0.5)  # a first turn waits for memory that never opens
    llm_server.reply = answer
    store_path = tmp_path / "store"
    held = HeldWrite()
    opening = threading.Event()
    held_lock = FileLock(str(store_path / LOCK_FILE), thread_local=False)
    if moment == "memory loading":
        def slow_open(memory: SessionMemory, **options: Any) -> bool:
            opening.wait(60)  # memory is still loading when the window closes
            memory.error = "the test never let memory open"
            return False

        hooks.setattr(SessionMemory, "open", slow_open)
    elif moment == "store busy":
        store_path.mkdir()
        held_lock.acquire()  # as a one-shot command (an import) holding the store would
    app = make_app(llm_server, **{"vector_store.path": str(store_path)})
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            if moment.startswith("write"):
                await memory_ready(app, pilot)
                held.install(hooks)
                held.fail = moment == "write that fails"
                prompt = app.query_one("#prompt")
                prompt.text = PROMPT  # type: ignore[attr-defined]
                await pilot.press("enter")
                for _ in range(600):
                    if held.started.is_set():
                        break
                    await pilot.pause(0.05)
                assert held.started.is_set(), "the write never started"
            else:
                await send(app, pilot, PROMPT)
                assert [e.user_prompt for e in app.session.session_memory.unsaved] == [PROMPT]
            await leave_window(app, pilot, how, held)
        # What `ocat` does once the window has closed, up to the process's end (ocat.process_end.leave_now).
        note = process_end.settle(app.memory_view.closing, app.session.session_memory)
        if moment.startswith("write") and how != "/quit":
            # The write is still held: the answer is in a file, and the exit said where.
            assert kept_prompts(Path(os.environ["HOME"])) == [PROMPT]
            assert note is not None and "kept in" in note
    finally:
        held.released.set()
        opening.set()
        if held_lock.is_locked:
            held_lock.release()
    closing = app.memory_view.closing
    assert closing is not None
    closing.join(60)  # the process would have ended here; the threads end now that the write is let go
    home = Path(os.environ["HOME"])
    hooks.undo()  # the next start writes as ocat does
    later = ChatSession.open(app.session.settings, serve=False)
    try:
        store = later.session_memory.store
        assert store is not None, later.session_memory.error
        stored = store.get_session(app.session.session_id)
        assert [e.user_prompt for e in stored] == [PROMPT]  # once
        assert stored[0].assistant_response == answer
        assert kept_files(home) == []
    finally:
        later.close()
