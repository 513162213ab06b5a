"""What the memory commands say: short unique ids to act on, a memory shown in full, counts,
sources and scores in words, and a missing key named (issue 16)."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from ocat.commands import CommandResult, run_command
from ocat.config.loading import load_settings
from ocat.llm import provider_error
from ocat.memory import MemoryStore
from ocat.records import Exchange, SearchHit
from ocat.operations.lookup import resolve_id, short_id
from ocat.operations.search import HitLine, score_text
from ocat.repl import render_result
from ocat.chat.session import ChatSession
from ocat.config.settings import LLMSettings
from ocat.text.terminal import count_of
from tests.support.cli import Cli
from tests.support.pilot import make_app, memory_ready, send, wait_for_command

ANSWER = "# Garden plan\n\n- tomatoes first\n- then beans\n"


def exchange(exchange_id: str, thread: str = "garden-thread", answer: str = ANSWER) -> Exchange:
    return Exchange(user_prompt="plan the garden", assistant_response=answer, thread_id=thread,
                    session_id="old-session", exchange_id=exchange_id, timestamp=1700000000.0)


def test_vquery_shows_short_ids_that_vget_and_vdelete_take(session: ChatSession, store: MemoryStore) -> None:
    run_command(session, "/vadd the spare key is under the blue flowerpot")
    run_command(session, "/vadd the bike lock code is 4711")
    found = run_command(session, '/vquery "spare key" 5')
    assert found.columns[:3] == ("#", "id", "score") and len(found.rows) == 2
    assert found.text.startswith("2 results for ")
    ids = [row[1] for row in found.rows]
    stored = list(store.iter_ids("document"))
    # A chunk's short form keeps its index and the start of its document's key: doc-3f2a9c1e-0.
    assert all(re.fullmatch(r"doc-[0-9a-f]{8,}-\d+", i) and resolve_id(store, i) in stored for i in ids)
    shown = run_command(session, f"/vget {ids[0]}")
    assert not shown.error and shown.markdown in ("the spare key is under the blue flowerpot",
                                                   "the bike lock code is 4711")
    done = run_command(session, f"/vdelete {ids[0]} --yes")
    assert done.text.startswith("Deleted") and store.count("document") == 1
    assert run_command(session, '/vquery "spare key" 5').text.startswith("1 result for ")


def test_short_ids_grow_until_no_other_id_shares_them(store: MemoryStore) -> None:
    for exchange_id in ("abcdefgh-1111", "abcdefgh-1122", "abcdefgh", "zz"):
        store.add_exchange(exchange(exchange_id))
    assert short_id(store, "abcdefgh-1111") == "abcdefgh-11" + "1"
    assert short_id(store, "abcdefgh-1122") == "abcdefgh-112"
    # The whole id is the start of others: shown whole, and an exact id wins when resolved.
    assert short_id(store, "abcdefgh") == "abcdefgh" and resolve_id(store, "abcdefgh") == "abcdefgh"
    assert short_id(store, "zz") == "zz"
    assert short_id(store, "not-stored-at-all") == "not-stored-at-all"
    for full in ("abcdefgh-1111", "abcdefgh-1122"):
        assert resolve_id(store, short_id(store, full)) == full


def test_a_chunks_short_id_keeps_its_index_and_as_much_of_its_key_as_tells_it_apart(store: MemoryStore) -> None:
    from ocat.records import DocumentChunk

    ids = [f"doc-{'ab12' * 8}-{n}" for n in (1, 12)] + [f"doc-{'ab12' * 4}{'cd34' * 4}-1"]
    store.add_chunks([DocumentChunk(id=i, text=f"chunk {i}", metadata={"source": "cli"}) for i in ids])
    shown = [short_id(store, i) for i in ids]
    # -1 and -12 of one document differ by their index; the other document shares 16 hex digits.
    assert shown == [f"doc-{'ab12' * 4}a-1", f"doc-{'ab12' * 2}-12", f"doc-{'ab12' * 4}c-1"]
    assert [resolve_id(store, s) for s in shown] == ids
    with pytest.raises(Exception, match="more than one"):
        resolve_id(store, f"doc-{'ab12' * 2}-1")  # both documents have a chunk 1


def test_vget_shows_the_whole_answer_as_markdown_and_local_dates(session: ChatSession, store: MemoryStore) -> None:
    long_answer = ANSWER + "x" * 3000
    store.add_exchange(exchange("garden-thread-0", answer=long_answer))
    shown = run_command(session, "/vget garden-thread-0")
    assert long_answer in shown.markdown and "plan the garden" in shown.markdown
    details = dict(shown.rows)
    assert details["thread"] == "garden-thread" and details["session"] == "old-session"
    assert details["date"] == datetime.fromtimestamp(1700000000.0).strftime("%Y-%m-%d %H:%M")
    assert not any("1700000000" in value for _, value in shown.rows)
    printed = render_result(shown)
    assert "# Garden plan" in printed and long_answer.rstrip() in printed


def test_vget_shows_a_document_chunk_with_its_source_in_words(session: ChatSession, tmp_path: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("Standup moved to 9:30.")
    assert run_command(session, f"/vdoc {notes}").text.startswith("Added 1 chunk from")
    chunk = list(session.session_memory.store.iter_ids("document"))[0]  # type: ignore[union-attr]
    details = dict(run_command(session, f"/vget {chunk}").rows)
    assert details["source"] == "file" and details["file"] == str(notes)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", details["date"])


def test_a_remembered_note_shows_as_a_note_and_keeps_its_stored_source(session: ChatSession) -> None:
    result = run_command(session, "/remember the spare key is under the blue flowerpot")
    assert not result.error, result.text
    [note_id] = list(session.session_memory.store.iter_ids("document"))  # type: ignore[union-attr]
    assert dict(run_command(session, f"/vget {note_id}").rows)["source"] == "note"
    found = run_command(session, '/vquery "spare key flowerpot"')
    assert [row[4] for row in found.rows] == ["note"]
    stored = session.session_memory.store.get(note_id)  # type: ignore[union-attr]
    assert stored is not None and stored.metadata["source"] == "remember_command"  # display only


def test_counts_sources_and_scores_in_words() -> None:
    assert [count_of(n, "memory", "memories") for n in (0, 1, 2)] == ["0 memories", "1 memory", "2 memories"]
    assert count_of(1, "chunk") == "1 chunk" and count_of(3, "result") == "3 results"

    def note(source: str, **more: Any) -> SearchHit:
        return SearchHit(id="n", kind="document", score=0.5, text="t", metadata={"source": source, **more})

    assert [note(s).origin for s in ("vadd_command", "remember_command", "vdoc_command", "cli", "mcp", "import",
                                     "meeting")] == ["note", "note", "file", "file", "MCP", "import", "meeting"]
    assert note("cli", source_file="/home/me/plan.md").origin == "plan.md"


@pytest.mark.parametrize(("score", "shown", "admitted"), [
    (0.6996, "0.69", False), (0.70, "0.70", True), (0.7049, "0.70", True), (0.29, "0.29", False), (1.0, "1.00", True),
])
def test_a_score_is_rounded_down_so_the_mark_agrees_with_the_threshold(score: float, shown: str, admitted: bool) -> None:
    hit = SearchHit(id="x", kind="document", score=score, text="t", metadata={}, threshold=0.70)
    line = HitLine.of(hit, "relevant")
    assert line.score == shown == score_text(score) and line.admitted is admitted
    assert line.marked_score == shown + ("*" if admitted else "")


def llm_settings(**more: str) -> LLMSettings:
    return load_settings(env={}, overrides={"llm.model": "gpt-4o-mini", **{f"llm.{k}": v for k, v in more.items()}}).llm


def test_a_missing_key_reported_as_a_server_error_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    class InternalServerError(Exception):
        pass

    raw = InternalServerError("litellm.InternalServerError: OpenAIException - Missing credentials. Please pass an "
                              "`api_key`, or set the `OPENAI_API_KEY` environment variable.")
    message = str(provider_error(raw, llm_settings()))
    assert message == "no credentials for gpt-4o-mini: set OPENAI_API_KEY (or llm.api_key), or try --dummy-mode"
    # With a key set, the same kind of failure is the provider's, as before.
    keyed = str(provider_error(InternalServerError("boom"), llm_settings(api_key="sk-x")))
    assert keyed.startswith("cannot reach the provider for gpt-4o-mini")


def test_line_mode_prints_markdown_after_the_rows() -> None:
    result = CommandResult(text="Exchange x", columns=("field", "value"), rows=[("id", "x")], markdown="**Answer**\n")
    assert render_result(result) == "Exchange x\nfield  value\nid     x\n\n**Answer**"


@pytest.mark.slow
def test_cli_query_text_shows_ids_the_chat_takes(cli: Cli, tmp_path: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("The spare key is under the blue flowerpot.")
    added = cli("--add-to-vector-store", str(notes))
    assert added.returncode == 0 and added.stdout.startswith("Added 1 chunk from"), added.stderr
    found = cli("--query-vector-store", "where is the spare key")
    assert found.returncode == 0, found.stderr
    line = found.stdout.splitlines()[0]
    match = re.match(r"\s*1\. \S+\s+document (\S+)  \d{4}-\d\d-\d\d  notes\.md  \(", line)
    assert match, line
    shown = cli("--plain", "--dummy-mode", input=f"/vget {match.group(1)}\n/vdelete {match.group(1)} --yes\n")
    assert shown.returncode == 0, shown.stderr
    assert "The spare key is under the blue flowerpot." in shown.stdout and "Deleted the document chunk" in shown.stdout
    assert cli("--query-vector-store", "where is the spare key").stdout.startswith("No memories found.")


@pytest.mark.slow
@pytest.mark.anyio
async def test_vget_renders_the_answer_as_markdown_at_80x24() -> None:
    from textual.widgets import Markdown

    app = make_app(dummy=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await memory_ready(app, pilot)
        app.session.session_memory.store.add_exchange(exchange("garden-thread-0"))
        await send(app, pilot, "/vget garden-thread-0")
        await wait_for_command(app, pilot)
        shown = app.query_one(".command-result").query_one(Markdown)
        # Rendered, not shown as source: a heading block and a list block, no "# " or "- " left.
        assert len(shown.query("MarkdownH1")) == 1 and len(shown.query("MarkdownBulletList")) == 1
        assert "Garden plan" in str(shown.query_one("MarkdownH1").render())


@pytest.mark.slow
def test_snapshot_vget_of_an_exchange_at_80x24(snap_compare: Any) -> None:
    async def settle(pilot: Any) -> None:
        app = pilot.app
        await memory_ready(app, pilot)
        app.session.session_memory.store.add_exchange(exchange("garden-thread-0"))
        await send(app, pilot, "/vget garden-thread-0")
        await wait_for_command(app, pilot)

    assert snap_compare(make_app(dummy=True), terminal_size=(80, 24), run_before=settle)
