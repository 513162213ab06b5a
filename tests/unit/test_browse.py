"""The memory browser's operations (ocat.operations.browse): listing, filtering, searching,
showing, deleting and exporting entries, on a store with a deterministic fake embedder."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ocat.commands import run_command
from ocat.memory import MemoryStore
from ocat.records import Exchange
from ocat.operations.browse import (
    Filters,
    browse,
    delete_entries,
    entry_markdown,
    export_entry,
    search_entries,
)
from ocat.chat.session import ChatSession


def old_exchange(store: MemoryStore, thread: str, prompt: str, answer: str, days_ago: float) -> None:
    store.add_exchange(Exchange(user_prompt=prompt, assistant_response=answer, thread_id=thread, session_id="s0",
                                exchange_id=f"{thread}-{prompt[:5]}", timestamp=time.time() - days_ago * 86400))


def filled(session: ChatSession, store: MemoryStore, tmp_path: Path) -> None:
    """Two threads (one renamed), a note and a three-chunk document."""
    session.record("plan the vegetable garden", "tomatoes first, then beans", [])
    session.record("when do I sow beans?", "after the last frost", [])
    run_command(session, "/rename Garden")
    old_exchange(store, "taxes", "file the taxes before April", "done by Friday", days_ago=40)
    run_command(session, "/vadd the spare key is under the blue flowerpot")
    doc = tmp_path / "pepper.md"
    doc.write_text("# Peppers\n\n" + "\n\n".join(f"Pepper note {i}: " + "capsicum " * 120 for i in range(3)))
    assert "Added" in run_command(session, f"/vdoc {doc}").text


def test_the_list_shows_threads_notes_and_documents_newest_first(
    session: ChatSession, store: MemoryStore, tmp_path: Path
) -> None:
    filled(session, store, tmp_path)
    entries = browse(store, Filters())
    kinds = [e.kind for e in entries]
    assert sorted(kinds) == ["document", "note", "thread", "thread"]
    assert [e.when for e in entries] == sorted((e.when for e in entries), key=lambda w: -(w or 0))
    garden = next(e for e in entries if e.kind == "thread" and e.key == session.thread_id)
    assert (garden.title, garden.size, garden.source) == ("Garden", 2, "chat")
    document = next(e for e in entries if e.kind == "document")
    assert document.title == "pepper.md" and document.size > 1 and document.source == "file"
    note = next(e for e in entries if e.kind == "note")
    assert note.title.startswith("the spare key") and note.source == "note"


def test_filters_narrow_by_kind_date_and_source(session: ChatSession, store: MemoryStore, tmp_path: Path) -> None:
    filled(session, store, tmp_path)
    exchanges = browse(store, Filters(kind="exchange"))
    assert len(exchanges) == 3 and all(e.kind == "exchange" and e.thread_id for e in exchanges)
    assert exchanges[0].title == "when do I sow beans?"  # newest first
    this_week = browse(store, Filters(kind="thread", period="this week"))
    assert [e.key for e in this_week] == [session.thread_id]  # the taxes thread is 40 days old
    assert {e.kind for e in browse(store, Filters(source="note"))} == {"note"}
    assert {e.kind for e in browse(store, Filters(source="file"))} == {"document"}
    assert browse(store, Filters(kind="note", source="chat")) == []
    # Each filter steps through its values and comes back round.
    filters = Filters()
    for _ in range(5):
        filters = filters.stepped("kind")
    assert filters == Filters()
    assert Filters().stepped("period").stepped("source") == Filters(period="today", source="chat")


def test_search_finds_exchanges_threads_and_passages(session: ChatSession, store: MemoryStore, tmp_path: Path) -> None:
    filled(session, store, tmp_path)
    settings = session.settings.vector_store
    found = search_entries(store, "sow beans frost", Filters(), settings)
    assert found and found[0].kind == "exchange" and found[0].score is not None
    threads = search_entries(store, "sow beans frost", Filters(kind="thread"), settings)
    assert threads[0].kind == "thread" and threads[0].key == session.thread_id and threads[0].size == 2
    assert len({e.key for e in threads}) == len(threads)
    passages = search_entries(store, "capsicum pepper", Filters(kind="document"), settings)
    assert passages and all(e.kind == "passage" and e.title.startswith("pepper.md: ") for e in passages)


def test_an_entry_shows_whole(session: ChatSession, store: MemoryStore, tmp_path: Path) -> None:
    filled(session, store, tmp_path)
    entries = {e.kind: e for e in browse(store, Filters())}
    thread = entry_markdown(store, next(e for e in browse(store, Filters(kind="thread")) if e.title == "Garden"))
    assert thread.startswith("# Garden") and "after the last frost" in thread
    document = entry_markdown(store, entries["document"])
    assert document.count("Pepper note") == 3 and document.index("note 0") < document.index("note 2")
    assert "blue flowerpot" in entry_markdown(store, entries["note"])
    exchange = entry_markdown(store, browse(store, Filters(kind="exchange"))[0])
    assert "**Answer**" in exchange and "thread " in exchange.splitlines()[0]


def test_deleting_entries_removes_every_memory_they_stand_for(
    session: ChatSession, store: MemoryStore, tmp_path: Path
) -> None:
    filled(session, store, tmp_path)
    entries = browse(store, Filters())
    garden = next(e for e in entries if e.key == session.thread_id)
    document = next(e for e in entries if e.kind == "document")
    chunks = store.count("document")
    deleted = delete_entries(store, [garden, document])
    assert deleted.memories == 2 + document.size and deleted.threads == (session.thread_id,)
    assert deleted.sentence() == f"Deleted {2 + document.size} memories (1 thread)."
    assert store.get_thread(session.thread_id) == []
    assert store.count("document") == chunks - document.size
    assert store.threads.titles([session.thread_id]) == {}
    assert sorted(e.kind for e in browse(store, Filters())) == ["note", "thread"]


def test_exporting_an_exchange_writes_its_whole_thread(session: ChatSession, store: MemoryStore, tmp_path: Path) -> None:
    filled(session, store, tmp_path)
    exchange = browse(store, Filters(kind="exchange"))[0]
    target, count = export_entry(store, exchange, tmp_path)
    assert (target.name, count) == ("ocat-garden.md", 2)
    assert "tomatoes first" in target.read_text() and "after the last frost" in target.read_text()
    note = next(e for e in browse(store, Filters()) if e.kind == "note")
    with pytest.raises(Exception, match="only a thread"):
        export_entry(store, note, tmp_path)
