"""Issue 23, break 1: one huge prompt never turns memory off, and nothing said is silently dropped.

A prompt with more distinct words than SQLite takes parameters in one statement once failed the
lexical search ("too many SQL variables"), turned memory off for the rest of the session, and
every later turn was dropped without a word. Now a query is bounded, a failed search is only
that turn's, an exchange memory could not take is tried again on the next turn, and whatever
is still waiting when the chat ends is kept in a file that the next start writes.
"""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest

from ocat.errors import StoreError
from ocat.memory import MemoryStore
from ocat.chat.session import ChatSession
from tests.support.warm_start import python_command
from tests.support.cli import Cli, stats
from tests.support.fakes import FakeLLMServer
from tests.unit.test_session import session_on

# More distinct words than one SQLite statement takes parameters: 32,766 by default, 250,000 in
# the build measured here (3.40.1); 290k distinct words were the reported attack.
DISTINCT_WORDS = 300_000


def huge_prompt(words: int = DISTINCT_WORDS) -> str:
    """One line of `words` distinct made-up words (no stop words, none shorter than 2 letters)."""
    return " ".join(f"qx{index:06d}" for index in range(words))


def chat_args(server: FakeLLMServer) -> list[str]:
    return ["--plain", "--model", "openai/fake-model",
            "--set", f"llm.api_base={server.api_base}", "--set", "llm.api_key=sk-test"]


# -- the core: bounded queries ---------------------------------------------------------------------


def test_a_query_is_searched_by_a_bounded_number_of_terms() -> None:
    from ocat.memory.storage.terms import MAX_QUERY_TERMS, query_terms, terms

    assert query_terms("the printer on floor two") == terms("the printer on floor two")
    many = query_terms(huge_prompt(5000) + " printer printer printer")
    assert len(set(many)) == MAX_QUERY_TERMS
    assert "printer" in many  # the most repeated term is kept


def test_the_chats_two_queries_read_a_huge_prompt_once(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """The chat searches with the prompt and with the last prompts then the prompt: the prompt's
    terms are read once for both (a 300,000-word prompt cost its reading twice)."""
    from ocat.memory.storage import terms as terms_module
    from ocat.memory.retrieval.retrieve import retrieve_any
    from ocat.memory import RetrievalLimits
    from ocat.config.loading import load_settings

    session = session_on(store)
    session.record("qx000123 is where the printer lives", "noted", [])
    prompt, earlier = huge_prompt(20_000) + " printer printer", "where is the printer?"
    queries = [prompt, f"{earlier}\n{prompt}"]
    expected = [terms_module.query_terms(q) for q in queries]
    assert terms_module.queries_terms(queries) == expected
    assert terms_module.queries_terms([prompt, f"{earlier}{prompt}"]) == [expected[0], terms_module.query_terms(
        f"{earlier}{prompt}")]  # not after a line break: read on its own
    read: list[int] = []
    reading = terms_module.terms
    monkeypatch.setattr(terms_module, "terms", lambda text: read.append(len(text)) or reading(text))
    hits = retrieve_any(store, queries, RetrievalLimits.from_settings(load_settings(env={}).vector_store))
    assert hits and hits[0].id
    assert sum(read) < len(prompt) + 1000  # the prompt once, the earlier prompt once, and the hits' texts


def test_a_search_with_more_terms_than_sqlite_takes_succeeds(store: MemoryStore) -> None:
    from ocat.memory.storage.terms import terms

    session = session_on(store)
    session.record("qx000123 is where the printer lives", "noted", [])
    # SQLite's own limit on a statement's variables, 32,766 (Debian's build allows 250,000, which
    # the CLI test below passes with 300k words), and more distinct terms than that: 40k.
    store.lexical.file.connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 32_766)
    prompt = huge_prompt(40_000)
    # Straight at the index too: doc_freqs of 40k terms is read in slices.
    assert len(store.lexical.doc_freqs("exchange", terms(prompt))) == 40_000
    session.turn(prompt).recall()
    assert session.session_memory.on and session.session_memory.problem is None


def test_the_embedder_reads_only_what_the_model_can_use() -> None:
    from ocat.memory.embedding.embedders import leading_words

    text = "alpha  beta\n gamma delta"
    assert leading_words(text, 2) == "alpha  beta"
    assert leading_words(text, 10) == text
    assert len(leading_words(huge_prompt(), 512)) < 5000


# -- the session: a failed search or write is that turn's, not memory off ---------------------------


def test_a_failed_search_leaves_memory_on_and_the_exchange_is_stored(store: MemoryStore) -> None:
    session = session_on(store)

    def failing(*args: object, **kwargs: object) -> list[tuple[str, float]]:
        raise StoreError("lexical search failed: too many SQL variables")

    store.lexical.search = failing  # type: ignore[method-assign]
    session.record("an earlier exchange about printers", "noted", [])
    assert session.turn("where is the printer?").recall() == []
    assert session.session_memory.on and session.session_memory.error is None
    assert "not searched" in (session.session_memory.problem or "") and "too many SQL variables" in (session.session_memory.problem or "")
    session.record("where is the printer?", "floor two", [])
    assert store.count("exchange") == 2 and not session.session_memory.unsaved


def test_a_failed_write_is_kept_and_tried_again_on_the_next_turn(store: MemoryStore) -> None:
    session = session_on(store)
    real_add = store.add_exchanges
    failures = iter([StoreError("the disk is full")])

    def add_once_failing(*args: object, **kwargs: object) -> int:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return real_add(*args, **kwargs)  # type: ignore[arg-type]

    store.add_exchanges = add_once_failing  # type: ignore[method-assign]
    first = session.record("first", "one", []).exchange
    assert session.session_memory.unsaved == [first] and session.session_memory.on
    assert "not written to memory yet" in (session.session_memory.problem or "")
    session.turn("second").recall()  # the next turn writes what waited
    assert not session.session_memory.unsaved and store.count("exchange") == 1
    session.record("second", "two", [])
    assert store.count("exchange") == 2


def test_what_memory_cannot_take_at_the_end_is_kept_and_the_next_start_writes_it(store: MemoryStore) -> None:
    from ocat.chat.unsaved import unsaved_folder

    session = session_on(store)

    def gone(*args: object, **kwargs: object) -> int:
        raise StoreError("the store went away")

    store.add_exchanges = gone  # type: ignore[method-assign]
    store.count = gone  # type: ignore[method-assign,assignment]
    session.record("remember the blue door", "noted", [])
    assert not session.session_memory.on and len(session.session_memory.unsaved) == 1
    note = session.close() or ""
    assert "1 exchange of this chat could not be written to memory" in note and "kept in" in note
    files = list(unsaved_folder(session.settings).glob("*.jsonl"))
    assert len(files) == 1 and "remember the blue door" in files[0].read_text()

    # The next start opens the store again (the chat's close gave this one up).
    again = MemoryStore.open(store.location, store.embedder, name=store.name)
    later = ChatSession(session.settings, store=again)
    said = later.session_memory.save_unsaved_files() or ""
    assert "1 exchange kept by an earlier chat was written to memory" in said
    assert again.count("exchange") == 1 and not list(unsaved_folder(session.settings).glob("*.jsonl"))


# -- the CLI: the attack as a user makes it ---------------------------------------------------------


@pytest.mark.slow
def test_a_huge_prompt_in_line_mode_keeps_memory_on_and_every_turn(cli: Cli, llm_server: FakeLLMServer) -> None:
    llm_server.reply = "Noted."
    run = cli(*chat_args(llm_server), input=huge_prompt() + "\nmy cat is called Miso\n/quit\n")
    assert run.returncode == 0, run.stderr
    assert "memory is off" not in run.stderr and "Traceback" not in run.stderr
    assert stats(cli)["exchanges"] == 2  # the huge turn and the ordinary one after it
    found = cli("--query-vector-store", "what is my cat called?", "--output", "json")
    assert found.returncode == 0 and "Miso" in found.stdout


@pytest.mark.slow
def test_a_huge_query_and_a_huge_ask_succeed(cli: Cli, llm_server: FakeLLMServer) -> None:
    big = huge_prompt()
    note = cli.home / "picnic.txt"
    note.write_text("qx000042 marks the spot of the picnic\n")
    added = cli("--add-to-vector-store", str(note))
    assert added.returncode == 0, added.stderr
    query = cli("--query-vector-store", "-", "--output", "json", input=big)
    assert query.returncode == 0, query.stderr
    llm_server.reply = "A long read."
    asked = cli("--ask", "-", "--model", "openai/fake-model", "--set", f"llm.api_base={llm_server.api_base}",
                "--set", "llm.api_key=sk-test", "--output", "json", input=big)
    assert asked.returncode == 0, asked.stderr
    assert asked.json()["result"]["exchange_id"] is not None and "memory is off" not in asked.stderr
    assert stats(cli)["exchanges"] == 1


@pytest.mark.slow
def test_quitting_with_unsaved_exchanges_says_where_they_went_and_the_next_start_writes_them(
    cli: Cli, llm_server: FakeLLMServer, tmp_path: Path
) -> None:
    # The store's folder is blocked by a file: memory is off for the whole chat.
    cli.store_path.parent.mkdir(parents=True, exist_ok=True)
    cli.store_path.write_text("a file where the store should be")
    llm_server.reply = "Noted."
    run = cli(*chat_args(llm_server), input="the spare key is under the blue pot\n/quit\n")
    assert run.returncode == 0, run.stderr
    assert "1 exchange of this chat could not be written to memory" in run.stderr
    assert "kept in ~/.local/state/ocat/unsaved/" in run.stderr and "next start" in run.stderr

    cli.store_path.unlink()  # the store can open again: the next start writes what was kept
    later = cli(*chat_args(llm_server), input="hello\n/quit\n")
    assert later.returncode == 0, later.stderr
    assert "1 exchange kept by an earlier chat was written to memory" in later.stderr
    found = cli("--query-vector-store", "where is the spare key?", "--output", "json")
    assert "blue pot" in found.stdout


# -- the full-screen chat ----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_chat_says_a_search_failed_keeps_memory_on_and_stores_the_turn(
    llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ocat.memory.storage.lexical_index import LexicalIndex
    from tests.support.pilot import make_app, memory_ready, notices, send
    from ocat.ui.memory_view import MemoryState

    app = make_app(llm_server)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        await send(app, pilot, "the ladder is in the shed")  # something to search

        def failing(*args: object, **kwargs: object) -> list[tuple[str, float]]:
            raise StoreError("lexical search failed: too many SQL variables")

        monkeypatch.setattr(LexicalIndex, "search", failing)
        await send(app, pilot, "where did I leave the ladder?")
        assert any("memories were not searched" in n and "too many SQL variables" in n for n in notices(app))
        assert app.session.session_memory.on and app.memory_view.state is not MemoryState.OFF
        stored = app.session.session_memory.store.get_session(app.session.session_id)
        assert [e.user_prompt for e in stored] == ["the ladder is in the shed", "where did I leave the ladder?"]


@pytest.mark.slow
@pytest.mark.anyio
async def test_quitting_the_chat_with_unsaved_exchanges_keeps_them_and_says_where(
    llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ocat.chat.unsaved import unsaved_folder
    from tests.support.pilot import make_app, memory_ready, send

    app = make_app(llm_server)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)

        def gone(self: MemoryStore, *args: object, **kwargs: object) -> int:
            raise StoreError("the store went away")

        monkeypatch.setattr(MemoryStore, "add_exchanges", gone)
        monkeypatch.setattr(MemoryStore, "count", gone)
        await send(app, pilot, "the spare key is under the blue pot")
        assert len(app.session.session_memory.unsaved) == 1
        await pilot.press("ctrl+q")
    assert app.memory_view.closing is not None
    app.memory_view.closing.join(30)
    note = app.session.session_memory.unsaved_note or ""
    assert "1 exchange of this chat could not be written to memory" in note and "kept in" in note
    files = list(unsaved_folder(app.session.settings).glob("*.jsonl"))
    assert len(files) == 1 and "blue pot" in files[0].read_text()


# A chat whose store could not open was left at once while the model's ONNX session was still
# being built in a daemon thread: interpreter shutdown aborted the process inside ONNX Runtime
# ("terminate called without an active exception", exit -6). Exit now waits for that load.
WAIT_FOR_THE_MODEL = """
import pathlib, sys, time
import ocat.memory as memory
from ocat.config.loading import load_settings
from ocat.chat.session import ChatSession

real = memory.preload_embedder
marker = pathlib.Path(sys.argv[1])

def slow_preload(settings, **options):
    time.sleep(0.5)  # the session is still being built when the chat ends
    real(settings, **options)
    marker.write_text("loaded")

memory.preload_embedder = slow_preload
session = ChatSession.open(load_settings(), dummy=False, serve=False)
assert not session.session_memory.on, "the store should be blocked"
"""


@pytest.mark.slow
def test_leaving_a_chat_whose_store_failed_waits_for_the_model_being_loaded(cli: Cli, tmp_path: Path) -> None:
    cli.store_path.parent.mkdir(parents=True, exist_ok=True)
    cli.store_path.write_text("a file where the store should be")
    marker = tmp_path / "loaded"
    run = subprocess.run(python_command("-c", WAIT_FOR_THE_MODEL, str(marker), env=cli.environ()), capture_output=True, text=True,
                         env=cli.environ(), cwd=cli.home, timeout=120)
    assert run.returncode == 0, run.stderr
    assert marker.read_text() == "loaded"  # the process ended after the model's session, not inside it
