"""Links between versions of a fact (ocat.memory.storage.versions): made, refused, followed, undone, counted."""

from __future__ import annotations

import re

from typing import Any

import pytest

from ocat import memory
from ocat.errors import NotFound, UsageError
from ocat.memory import MemoryStore, add_text
from ocat.records import UPDATE_EVIDENCE_KEY, UPDATE_HOW_KEY, UPDATED_BY_KEY, Exchange
from ocat.text.chunking import ChunkingSettings

OPTIONS = ChunkingSettings(strategy="fixed_size", chunk_size=40, chunk_overlap=0, max_chunk_size=60,
                           preserve_sentence_boundaries=False)
DAY = 86400.0


def said(store: MemoryStore, prompt: str, answer: str, day: int) -> str:
    """Store an exchange on day `day` (of 2025-07-01 on); its id."""
    exchange = Exchange(user_prompt=prompt, assistant_response=answer, thread_id="t", session_id="s",
                        timestamp=1751328000.0 + day * DAY)
    store.add_exchange(exchange)
    return exchange.exchange_id


@pytest.fixture
def doses(store: MemoryStore) -> list[str]:
    """Three versions of a dose, oldest first."""
    return [said(store, "My metformin dose?", f"You take {mg} mg.", day) for day, mg in ((0, 500), (10, 850), (20, 1000))]


def test_a_link_is_kept_on_the_older_version_and_followed_to_the_newest(store: MemoryStore, doses: list[str]) -> None:
    a, b, c = doses
    memory.link(store, a, b, "found", "500 mg -> 850 mg")
    assert memory.link_many(store, "exchange", [(b, c, "850 mg -> 1000 mg")], "user") == 1
    stored = store.exchanges.get(ids=[a], include=["metadatas"])["metadatas"][0]
    assert (stored[UPDATED_BY_KEY], stored[UPDATE_EVIDENCE_KEY], stored[UPDATE_HOW_KEY]) == (b, "500 mg -> 850 mg", "found")
    assert memory.newest(store, a) == c and memory.newest(store, c) == c
    for one in doses:  # from any version, the whole chain, oldest first, with dates and evidence
        chain = memory.versions(store, one)
        assert [v.key for v in chain] == doses
    first, second, last = memory.versions(store, b)
    assert (first.updated_by, first.evidence, first.how) == (b, "500 mg -> 850 mg", "found")
    assert second.how == "user" and last.updated_by is None
    assert first.date is not None and last.date is not None and first.date < last.date
    counts = memory.count_links(store)
    assert (counts.found, counts.model, counts.user, counts.dangling) == (1, 0, 1, ())


def test_circles_self_links_other_kinds_and_unknown_ids_are_refused_changing_nothing(
    store: MemoryStore, doses: list[str]
) -> None:
    a, b, c = doses
    memory.link(store, a, b, "user")
    memory.link(store, b, c, "user")
    with pytest.raises(UsageError, match="circle"):
        memory.link(store, c, a, "user")
    with pytest.raises(UsageError, match="cannot update itself"):
        memory.link(store, a, a, "user")
    note = add_text(store, "The spare key is under the blue flowerpot.", OPTIONS).ids[0]
    with pytest.raises(UsageError, match="its own kind"):
        memory.link(store, a, note, "user")
    with pytest.raises(UsageError, match="its own kind"):
        memory.link_many(store, "exchange", [(c, note, "")], "found")
    with pytest.raises(NotFound, match="no memory with id nothing-here"):
        memory.link(store, c, "nothing-here", "user")
    # A batch with one circle in it writes none of its links.
    d = said(store, "My metformin dose?", "You take 1200 mg.", 30)
    with pytest.raises(UsageError, match="circle"):
        memory.link_many(store, "exchange", [(c, d, ""), (d, a, "")], "found")
    assert memory.newest(store, a) == c
    assert memory.count_links(store).user == 2


def test_a_found_link_never_replaces_a_certain_one(store: MemoryStore, doses: list[str]) -> None:
    a, b, c = doses
    memory.link(store, a, c, "user", "the user said so")
    assert memory.link_many(store, "exchange", [(a, b, "500 -> 850")], "found") == 0
    assert memory.newest(store, a) == c


def test_unlink_undoes_a_link_and_says_what_it_named(store: MemoryStore, doses: list[str]) -> None:
    a, b, _ = doses
    memory.link(store, a, b, "found", "500 mg -> 850 mg")
    assert memory.unlink(store, a) == ("exchange", b)
    assert memory.unlink(store, a) == ("exchange", None)
    stored = store.exchanges.get(ids=[a], include=["metadatas"])["metadatas"][0]
    assert UPDATED_BY_KEY not in stored and UPDATE_HOW_KEY not in stored
    assert [v.key for v in memory.versions(store, a)] == [a]


def test_a_note_is_linked_on_every_chunk_by_its_document_id(store: MemoryStore) -> None:
    old = add_text(store, "The gate code is 1234. " * 6, OPTIONS)
    new = add_text(store, "The gate code is 5678. " * 6, OPTIONS)
    assert len(old.ids) > 1
    assert memory.link(store, old.ids[1], new.ids[0], "user", "1234 -> 5678") == "document"
    chunks = store.documents.get(ids=list(old.ids), include=["metadatas"])["metadatas"]
    newer_document = store.get(new.ids[0]).metadata["document_id"]  # type: ignore[union-attr]
    assert {m[UPDATED_BY_KEY] for m in chunks} == {newer_document}
    chain = memory.versions(store, new.ids[2])
    assert [v.record_id for v in chain] == [old.ids[0], new.ids[0]]
    assert memory.count_links(store).user == 1  # a note's link is counted once, not per chunk


def test_deleting_the_newer_version_clears_the_older_ones_link(store: MemoryStore, doses: list[str]) -> None:
    a, b, c = doses
    memory.link(store, a, b, "found")
    memory.link(store, b, c, "found")
    store.delete([b])
    assert memory.newest(store, a) == a
    assert memory.count_links(store).found == 0  # b's own link went with it; a's was cleared
    old = add_text(store, "The gate code is 1234. " * 6, OPTIONS)
    new = add_text(store, "The gate code is 5678. " * 6, OPTIONS)
    memory.link(store, old.ids[0], new.ids[0], "user")
    store.delete([new.ids[1]])  # one chunk of the newer note: it still stands, and so does the link
    assert memory.count_links(store).user == 1
    store.delete([i for i in new.ids if i != new.ids[1]])
    assert memory.count_links(store).user == 0


def test_a_link_to_a_record_gone_behind_ocats_back_is_counted_dangling(store: MemoryStore, doses: list[str]) -> None:
    a, b, _ = doses
    memory.link(store, a, b, "model")
    store.exchanges.delete(ids=[b])  # another client, or an old ocat
    assert memory.count_links(store).dangling == (("exchange", a),)


def test_supersede_unlink_and_vget_as_commands(session: Any, store: MemoryStore, doses: list[str]) -> None:
    from ocat.commands import run_command

    a, b, c = doses
    done = run_command(session, f"/supersede {a[:8]} {b[:8]}")
    assert not done.error, done.text
    assert f"{a[:8]} is now an outdated version of {b[:8]} (500 -> 850)" in done.text
    assert not run_command(session, f"/supersede {b} {c} the dose went up again").error
    shown = run_command(session, f"/vget {b[:8]}")
    assert "**Versions**, oldest to newest" in shown.markdown
    versions_part = shown.markdown.split("**Versions**")[1]
    # Oldest to newest, with dates and what changed; the one asked about marked.
    assert versions_part.index(a[:8]) < versions_part.index(f"{b[:8]}*") < versions_part.rindex(c[:8])
    assert "2025-07-01" in versions_part and "-> " + b[:8] + " (user): 500 -> 850" in versions_part
    assert "(user): the dose went up again" in versions_part
    circle = run_command(session, f"/supersede {c[:8]} {a[:8]}")
    assert circle.error and "circle" in circle.text and "nothing was changed" in circle.text
    assert run_command(session, "/supersede nothing-like-it " + a[:8]).error
    undone = run_command(session, f"/unlink {a[:8]}")
    assert f"{a[:8]} is no longer an outdated version of {b[:8]}" in undone.text
    assert "nothing was changed" in run_command(session, f"/unlink {a[:8]}").text
    assert a[:8] not in run_command(session, f"/vget {c[:8]}").markdown.split("**Versions**")[1]
    assert "/supersede" in str(run_command(session, "/help").rows) and "/unlink" in str(run_command(session, "/help").rows)


@pytest.mark.slow
@pytest.mark.anyio
async def test_supersede_and_unlink_in_the_full_screen_chat_and_the_browsers_versions_and_unlink_key() -> None:
    from textual.widgets import Markdown

    from ocat.operations.add import add_note
    from ocat.ui.memory_browser import EntryList, MemoryBrowser
    from tests.support.pilot import make_app, memory_ready, notices, send, wait_for, wait_for_command

    app = make_app(dummy=True)
    async with app.run_test(size=(100, 30)) as pilot:
        await memory_ready(app, pilot)
        store = app.session.session_memory.store
        chunking = app.session.settings.chunking
        old = add_note(store, "The gate code is 1234.", chunking, source="vadd_command").ids[0]
        new = add_note(store, "The gate code is 5678.", chunking, source="vadd_command").ids[0]
        await send(app, pilot, f"/supersede {old} {new}")
        await wait_for_command(app, pilot)
        assert any("is now an outdated version of" in n and "(1234 -> 5678)" in n for n in notices(app))
        assert memory.newest(store, old) == memory.newest(store, new)
        await send(app, pilot, f"/unlink {old}")
        await wait_for_command(app, pilot)
        assert any("is no longer an outdated version" in n for n in notices(app))
        assert memory.count_links(store).total == 0
        memory.link(store, old, new, "found", "1234 -> 5678")
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: isinstance(app.screen, MemoryBrowser) and app.screen.entries, "the browser")
        browser = app.screen
        assert isinstance(browser, MemoryBrowser)
        browser.query_one(EntryList).focus()
        old_row = next(n for n, e in enumerate(browser.entries) if e.key == old)
        browser.query_one(EntryList).move_cursor(row=old_row)
        text = browser.query_one("#browser-text", Markdown)
        await wait_for(pilot, lambda: "**Versions**" in text.source and "(found): 1234 -> 5678" in text.source,
                       "the preview shows the versions, oldest first, with what changed")
        await pilot.press("u")
        await wait_for(pilot, lambda: memory.count_links(store).total == 0, "u unlinks it")
        await wait_for(pilot, lambda: "**Versions**" not in text.source, "the preview follows")


def test_a_threads_preview_shows_its_exchanges_versions_and_u_unlinks_its_one_outdated_exchange(
    store: MemoryStore, doses: list[str]
) -> None:
    from ocat.operations.browse import Entry, entry_markdown, unlink_entry

    a, b, _ = doses
    thread = Entry(kind="thread", key="t", title="dose", when=None, source="chat", size=3)
    assert "**Versions**" not in entry_markdown(store, thread)
    assert "Nothing in this thread is linked" in unlink_entry(store, thread)
    memory.link(store, a, b, "found", "500 -> 850")
    assert "(found): 500 -> 850" in entry_markdown(store, thread).split("**Versions**")[1]
    assert unlink_entry(store, thread) == f"The exchange is no longer an outdated version of {b[:12]}."
    assert memory.count_links(store).total == 0


def test_a_notes_versions_heading_is_its_own_paragraph(session: Any) -> None:
    """A note's text has no closing line break: the heading once ran into it as one paragraph."""
    from ocat.commands import run_command

    first = run_command(session, "/remember The gate code is 4821.")
    second = run_command(session, "/remember The gate code is now 7730.")
    assert not first.error and not second.error, (first.text, second.text)
    older, newer = (re.search(r"\((doc-[0-9a-f]+-0)\)", done.text).group(1) for done in (first, second))  # type: ignore[union-attr]
    assert not run_command(session, f"/supersede {older} {newer}").error
    shown = run_command(session, f"/vget {older}").markdown
    assert "4821.\n\n" in shown.split("**Versions**")[0], shown
