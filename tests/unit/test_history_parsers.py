"""The parsers behind `ocat --import-history`: ChatGPT and Claude exports, llm's logs.db, finding
them in zips and folders, and the streaming JSON reader under them. No store, no UI."""

from __future__ import annotations

import io
import json
import sqlite3
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ocat.errors import InputFileError, UsageError
from ocat.history_import import (
    FORMATS,
    ConversationProblem,
    ImportedConversation,
    count_conversations,
    detect_format,
    read_history,
)
from ocat.history_import import chatgpt
from ocat.history_import.json_stream import iter_array
from ocat.history_import.llm_logs import read_llm
from tests.support.agent_fixtures import ferry_fix_session, tide_session
from tests.support.examples import examples
from tests.support.history_fixtures import (
    BASE_TIME,
    CountingStream,
    add_llm_response,
    branched_conversation,
    claude_attachment,
    claude_conversation,
    claude_message,
    create_llm_db,
    gpt_conversation,
    gpt_image,
    gpt_linear,
    gpt_message,
    gpt_text,
    legacy_db,
    message_store_db,
    three_conversations,
    write_json,
    write_zip,
)


def pairs(item: Any) -> list[tuple[str, str]]:
    """A conversation's exchanges as (prompt, answer) pairs."""
    assert isinstance(item, ImportedConversation), item
    return [(e.prompt, e.answer) for e in item.exchanges]


def read_all(path: Path, fmt: str | None = None) -> list[Any]:
    """Everything read_history yields for `path`."""
    return list(read_history(path, fmt))


# -- ChatGPT ------------------------------------------------------------------------------------


def test_chatgpt_reads_only_the_branch_that_ends_at_the_current_node(tmp_path: Path) -> None:
    [conversation] = read_all(write_json(tmp_path / "conversations.json", [branched_conversation()]))
    assert pairs(conversation) == [
        ("Name a river in Peru", "The Ucayali"),
        ("How long is it, in miles?", "About 1,000 miles"),
    ]
    assert conversation.source == "chatgpt"
    assert conversation.source_id == "conv-branches"
    assert conversation.title == "Branches"
    assert conversation.created == BASE_TIME
    assert [(e.source_id, e.timestamp) for e in conversation.exchanges] == [("u1", BASE_TIME + 1), ("u2b", BASE_TIME + 6)]


def test_chatgpt_another_current_node_picks_the_other_branch() -> None:
    item = branched_conversation()
    item["current_node"] = "a2"
    assert pairs(chatgpt.conversation(item, 1)) == [
        ("Name a river in Peru", "The Ucayali"),
        ("How long is it?", "About 1,600 km"),
    ]


def test_chatgpt_message_kinds() -> None:
    m = gpt_message
    nodes = [
        ("root", None, None),
        ("ctx", "root", m("ctx", "user", {"content_type": "user_editable_context", "user_profile": "I am a test"})),
        ("sys", "ctx", m("sys", "system", "You are ChatGPT")),
        ("u1", "sys", m("u1", "user", gpt_text(gpt_image(), "What bird is this?"))),
        ("a1", "u1", m("a1", "assistant", "A heron.")),
        ("u2", "a1", m("u2", "user", "Plot its wingspan")),
        ("code", "u2", m("code", "assistant", {"content_type": "code", "language": "python", "text": "plot(spans)"}, recipient="python")),
        ("tool", "code", m("tool", "tool", {"content_type": "execution_output", "text": "<figure>"})),
        ("empty", "tool", m("empty", "assistant", gpt_text(""))),
        ("hidden", "empty", m("hidden", "assistant", "internal note", hidden=True)),
        ("a2", "hidden", m("a2", "assistant", "Here is the plot.")),
        ("u3", "a2", m("u3", "user", gpt_text("", "   "))),
        ("u4", "u3", m("u4", "user", "Find a paper on herons")),
        ("browse", "u4", m("browse", "tool", {"content_type": "tether_browsing_display", "result": "search results"})),
        ("quote", "browse", m("quote", "assistant", {"content_type": "tether_quote", "url": "https://example.org", "title": "Herons", "text": "Herons wade."})),
        ("think", "quote", m("think", "assistant", {"content_type": "thoughts", "thoughts": [{"summary": "s", "content": "c"}]})),
        ("u5", "think", m("u5", "user", "Thanks, bye")),
    ]
    assert pairs(chatgpt.conversation(gpt_conversation("kinds", "Kinds", nodes), 1)) == [
        ("[image]\nWhat bird is this?", "A heron."),
        ("Plot its wingspan", "plot(spans)\n\nHere is the plot."),
        ("Find a paper on herons", "Herons wade."),
        ("Thanks, bye", ""),
    ]


def test_chatgpt_times_ids_and_titles_fall_back() -> None:
    item = gpt_linear("conv-x", "ignored", [("user", "hello"), ("assistant", "hi")])
    del item["id"]
    item["title"] = None
    item["create_time"] = None
    for node in item["mapping"].values():
        if node["message"] and node["message"]["author"]["role"] == "user":
            node["message"]["create_time"] = None
    conversation = chatgpt.conversation(item, 1)
    assert isinstance(conversation, ImportedConversation)
    assert (conversation.source_id, conversation.title, conversation.created) == ("conv-x", "", None)
    # No time on the prompt: the answer's time stands in.
    assert conversation.exchanges[0].timestamp == BASE_TIME + 1


def test_chatgpt_broken_trees_are_problems_and_the_others_still_come(tmp_path: Path) -> None:
    missing_parent = gpt_linear("missing", "Missing parent", [("user", "q"), ("assistant", "a")])
    missing_parent["mapping"]["missing-0"]["parent"] = "gone-node"
    cycle = gpt_linear("cycle", "Cycle", [("user", "q"), ("assistant", "a")])
    cycle["mapping"]["cycle-root"]["parent"] = "cycle-1"
    no_current = gpt_linear("nocurrent", "No current", [("user", "q"), ("assistant", "a")])
    no_current["current_node"] = "not-there"
    items = [
        gpt_linear("good-1", "Good 1", [("user", "first"), ("assistant", "one")]),
        missing_parent,
        cycle,
        no_current,
        "not a conversation",
        gpt_linear("good-2", "Good 2", [("user", "second"), ("assistant", "two")]),
    ]
    results = read_all(write_json(tmp_path / "conversations.json", items), "chatgpt")
    assert pairs(results[0]) == [("first", "one")]
    assert pairs(results[5]) == [("second", "two")]
    problems = results[1:5]
    assert all(isinstance(p, ConversationProblem) for p in problems)
    assert [(p.source_id, p.title) for p in problems[:3]] == [
        ("missing", "Missing parent"),
        ("cycle", "Cycle"),
        ("nocurrent", "No current"),
    ]
    assert "gone-node" in problems[0].problem and "missing-0" in problems[0].problem
    assert "cycle" in problems[1].problem and "cycle-" in problems[1].problem
    assert "not-there" in problems[2].problem
    assert "conversation 5" in problems[3].problem


def test_lone_surrogates_become_replacement_characters(tmp_path: Path) -> None:
    item = gpt_linear("sur", "Title \udc80", [("user", "bad \ud800 text"), ("assistant", "ok \U0001f426")])
    # json.dumps writes the lone surrogates as \ud800 escapes, as a broken export would.
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([item]), encoding="ascii")
    [conversation] = read_all(path)
    assert conversation.title == "Title \ufffd"
    assert pairs(conversation) == [("bad \ufffd text", "ok \U0001f426")]


# -- Claude ------------------------------------------------------------------------------------


def test_claude_text_content_blocks_and_attachments(tmp_path: Path) -> None:
    tool_use = {"type": "tool_use", "name": "web_search", "input": {"query": "otters"}}
    messages = [
        claude_message("h1", "human", "Summarise the notes", created_at="2024-05-01T09:00:00.500000Z",
                       attachments=[claude_attachment("notes.txt", "Otters hold hands.")],
                       files=[{"file_name": "notes.txt"}, {"file_name": "otter.png"}]),
        claude_message("a1", "assistant", "Otters hold hands while sleeping.",
                       content=[{"type": "text", "text": "the text field wins"}]),
        claude_message("h2", "human", "Search for more"),
        claude_message("a2", "assistant", "", content=[
            {"type": "text", "text": "Searching."}, tool_use,
            {"type": "tool_result", "content": [{"type": "text", "text": "raw results"}]},
            {"type": "text", "text": "They also use tools."},
        ]),
        claude_message("h3", "human", "And sea otters?"),
    ]
    items = [
        claude_conversation("c-1", "Otters", messages),
        claude_conversation("c-2", "", [claude_message("h", "human", "hi"), claude_message("a", "assistant", "hello")]),
    ]
    results = read_all(write_json(tmp_path / "conversations.json", items))
    first = results[0]
    assert pairs(first) == [
        ("Summarise the notes\n\n[attachment notes.txt]\nOtters hold hands.\n\n[file otter.png]",
         "Otters hold hands while sleeping."),
        ("Search for more", "Searching.\n\nThey also use tools."),
        ("And sea otters?", ""),
    ]
    assert (first.source, first.source_id, first.title) == ("claude", "c-1", "Otters")
    assert first.created == 1714553940.0
    assert first.exchanges[0].timestamp == 1714554000.5
    assert first.exchanges[0].source_id == "h1"
    assert pairs(results[1]) == [("hi", "hello")]


def test_claude_message_that_is_not_text_is_a_problem(tmp_path: Path) -> None:
    items = [
        claude_conversation("bad", "Bad", [claude_message("h", "human", "q"), claude_message("x", "assistant", 42)]),
        {"uuid": "no-messages", "name": "Empty"},
        claude_conversation("good", "Good", [claude_message("h", "human", "q"), claude_message("a", "assistant", "a")]),
    ]
    results = read_all(write_json(tmp_path / "conversations.json", items), "claude")
    assert isinstance(results[0], ConversationProblem)
    assert (results[0].source_id, results[0].problem) == ("bad", "message 2 is not text (its text is int)")
    assert isinstance(results[1], ConversationProblem) and results[1].source_id == "no-messages"
    assert pairs(results[2]) == [("q", "a")]


# -- llm logs.db -------------------------------------------------------------------------------


def test_llm_legacy_responses_grouped_by_conversation(tmp_path: Path) -> None:
    path = legacy_db(tmp_path / "logs.db")
    results = read_all(path)
    assert [(r.source_id, r.title) for r in results] == [
        ("01resp-1", ""),
        ("01conv-b", "capital of peru"),
        ("01conv-c", ""),
    ]
    assert pairs(results[0]) == [("a haiku about tea", "Steam rises, leaves unfurl")]
    assert pairs(results[1]) == [("capital of peru?", "Lima."), ("and its population?", "About 10 million.")]
    assert [e.source_id for e in results[1].exchanges] == ["01resp-2", "01resp-3"]
    assert results[1].exchanges[0].timestamp == 1706781600.0
    assert results[0].exchanges[0].timestamp == 1705307400.123456
    assert {r.source for r in results} == {"llm"}
    assert count_conversations(path) == 3


def test_llm_reads_while_another_connection_writes(tmp_path: Path) -> None:
    path = legacy_db(tmp_path / "logs.db")
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("begin immediate")
        add_llm_response(writer, "01resp-9", "uncommitted", "draft", None, "2025-01-01T00:00:00+00:00")
        assert len(list(read_llm(path, timeout=0.05))) == 3
        writer.execute("rollback")
        # An exclusive lock keeps readers out: the file is read as it is on disk instead.
        writer.execute("begin exclusive")
        add_llm_response(writer, "01resp-9", "uncommitted", "draft", None, "2025-01-01T00:00:00+00:00")
        assert [r.source_id for r in read_llm(path, timeout=0.05)] == ["01resp-1", "01conv-b", "01conv-c"]
    finally:
        writer.execute("rollback")
        writer.close()


def test_llm_reads_a_wal_database_during_a_write(tmp_path: Path) -> None:
    path = legacy_db(tmp_path / "logs.db", wal=True)
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("begin immediate")
        add_llm_response(writer, "01resp-9", "uncommitted", "draft", None, "2025-01-01T00:00:00+00:00")
        assert len(list(read_llm(path, timeout=0.05))) == 3
    finally:
        writer.execute("rollback")
        writer.close()
    # Read-only: the reader wrote nothing (no new rows, and the writer could commit).
    with sqlite3.connect(path) as db:
        assert db.execute("select count(*) from responses").fetchone()[0] == 4
    db.close()


def test_llm_message_store_threads(tmp_path: Path) -> None:
    """llm 0.32 logs threads of messages; legacy rows it also wrote as turns are read once, and a
    legacy conversation continued as a thread is read from the thread, with its old ids."""
    path = message_store_db(tmp_path / "logs.db")
    results = read_all(path)
    assert [r.source_id for r in results] == ["01thread-a", "01old", "01frag", "01broken"]
    assert pairs(results[0]) == [("Name a pelican", "Percy"), ("Now a walrus", "Wallace")]
    assert [e.source_id for e in results[0].exchanges] == ["01thread-a-turn0", "01thread-a-turn1"]
    assert pairs(results[1]) == [("first question", "first answer"), ("second question", "second answer")]
    assert results[1].title == "old chat"
    assert [(e.source_id, e.timestamp) for e in results[1].exchanges] == [
        ("01old-r1", 1704099600.0),
        ("01old-turn1", 1785927601.0),
    ]
    assert pairs(results[2]) == [("Roses are red\nwhat is this?", "It is a poem.")]
    assert results[2].exchanges[0].source_id == "01frag-t"
    assert isinstance(results[3], ConversationProblem)
    assert "b2:nowhere" in results[3].problem and "b2:orphan" in results[3].problem
    assert count_conversations(path, "llm") == 4


# -- finding and telling formats apart ---------------------------------------------------------


def test_detects_formats_from_content_not_names(tmp_path: Path) -> None:
    gpt = [gpt_linear("g", "G", [("user", "q"), ("assistant", "a")])]
    claude = [claude_conversation("c", "C", [claude_message("h", "human", "q")])]
    (tmp_path / "folder").mkdir()
    write_json(tmp_path / "folder" / "conversations.json", claude)
    (tmp_path / "shards").mkdir()
    write_json(tmp_path / "shards" / "conversations-000.json", gpt)
    write_json(tmp_path / "shards" / "conversations-001.json", gpt)
    (tmp_path / "llm").mkdir()
    create_llm_db(tmp_path / "llm" / "logs.db")
    cases = {
        write_json(tmp_path / "export.data", gpt): "chatgpt",
        write_json(tmp_path / "chatgpt.json", claude): "claude",
        tmp_path / "folder": "claude",
        tmp_path / "shards": "chatgpt",
        tmp_path / "llm": "llm",
        tmp_path / "llm" / "logs.db": "llm",
        write_zip(tmp_path / "a.zip", {"conversations.json": gpt, "chat.html": "<html></html>"}): "chatgpt",
        write_zip(tmp_path / "b.bin", {"conversations.json": claude, "users.json": []}): "claude",
        write_zip(tmp_path / "c.zip", {"export/conversations-001.json": gpt, "export/conversations-000.json": gpt}): "chatgpt",
        ferry_fix_session().write(tmp_path / "session.log"): "claude-code",
        tide_session().write(tmp_path / "codex" / "rollout.jsonl").parent: "codex",
    }
    assert {path.name: detect_format(path) for path in cases} == {path.name: fmt for path, fmt in cases.items()}
    assert set(cases.values()) == set(FORMATS)
    assert len(read_all(tmp_path / "shards")) == 2
    assert len(read_all(tmp_path / "c.zip")) == 2
    # JSON exports are counted by a key each conversation has once (a fast pass, for the progress bar).
    assert count_conversations(tmp_path / "a.zip") == len(read_all(tmp_path / "a.zip"))
    assert count_conversations(tmp_path / "c.zip") == 2


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("other.json", b'[{"role": "user", "text": "hi"}]', "its keys: role, text"),
        ("object.json", b'{"conversations": []}', "not a JSON list"),
        ("empty.json", b"[]", "holds no conversations"),
        ("picture.png", b"\x89PNG\r\n\x1a\n\x00\x00", "not UTF-8"),
        ("notes.db", None, "without llm's responses table"),
        ("nothing.zip", {"readme.txt": "hi"}, "holds no conversations.json"),
    ],
)
def test_unknown_content_is_refused_clearly(tmp_path: Path, name: str, content: Any, expected: str) -> None:
    path = tmp_path / name
    if content is None:
        with sqlite3.connect(path) as db:
            db.execute("create table notes (body text)")
        db.close()
    elif isinstance(content, dict):
        write_zip(path, content)
    else:
        path.write_bytes(content)
    with pytest.raises(InputFileError) as caught:
        detect_format(path)
    assert expected in str(caught.value)
    assert "ChatGPT" in str(caught.value) and str(path) in str(caught.value)


def test_missing_path_wrong_format_and_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="no such file or folder"):
        read_history(tmp_path / "absent.zip")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputFileError, match="holds no conversations.json"):
        read_history(tmp_path / "empty")
    json_file = write_json(tmp_path / "conversations.json", [])
    with pytest.raises(InputFileError, match="not the llm format"):
        read_history(json_file, "llm")
    with pytest.raises(UsageError, match="unknown history format"):
        read_history(json_file, "gemini")


# -- damaged files -----------------------------------------------------------------------------


def test_truncated_json_yields_complete_conversations_then_fails(tmp_path: Path) -> None:
    full = json.dumps(three_conversations(), indent=2).encode()
    path = tmp_path / "conversations.json"
    path.write_bytes(full[: full.index(b"question 2")])
    reader = read_history(path)
    assert [r.source_id for r in (next(reader), next(reader))] == ["c0", "c1"]
    with pytest.raises(InputFileError, match="ends in the middle of conversation 3"):
        next(reader)
    # Cut after a whole conversation, before the list is closed.
    path.write_bytes(full[: full.rindex(b"}") + 1])
    with pytest.raises(InputFileError, match="ends after conversation 3"):
        list(read_history(path))


def test_truncated_zip_is_refused_clearly(tmp_path: Path) -> None:
    path = write_zip(tmp_path / "export.zip", {"conversations.json": three_conversations()})
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputFileError, match="damaged or truncated zip"):
        read_history(path)


def test_corrupt_zip_data_is_an_input_error_not_a_traceback(tmp_path: Path) -> None:
    big = [gpt_linear(f"c{i}", "t", [("user", f"q{i} " * 2000), ("assistant", f"a{i} " * 2000)]) for i in range(30)]
    path = write_zip(tmp_path / "export.zip", {"conversations.json": big})
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo("conversations.json")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    middle = start + info.compress_size // 2
    data[middle : middle + 64] = bytes(64)
    path.write_bytes(bytes(data))
    with pytest.raises(InputFileError) as caught:
        list(read_history(path, "chatgpt"))
    assert "conversations.json in" in str(caught.value) and "the zip is damaged" in str(caught.value)


def test_non_utf8_file_names_the_byte_offset(tmp_path: Path) -> None:
    prefix = json.dumps(three_conversations()[:1])[:-1].encode() + b', {"title": "caf'
    path = tmp_path / "conversations.json"
    path.write_bytes(prefix + b'\xe9"}]')
    with pytest.raises(InputFileError) as caught:
        list(read_history(path, "chatgpt"))
    assert f"byte {len(prefix)} (0xe9)" in str(caught.value)
    assert str(path) in str(caught.value)


def test_bad_byte_offset_is_exact_across_chunks() -> None:
    # Two-byte characters before the bad byte put it, and the chunk edges, at every alignment.
    for count in range(6):
        data = b'["' + "\u00e9".encode() * count + b"\xff" + b'"]'
        with pytest.raises(InputFileError, match=f"byte {2 + 2 * count} \\(0xff\\)"):
            list(iter_array(io.BytesIO(data), "x.json", chunk_size=3))
    good = '["\u00e9", "' + "\u00fc" * 20 + '"]'
    assert list(iter_array(io.BytesIO(good.encode()), "x.json", chunk_size=3)) == json.loads(good)


# -- the JSON streamer -------------------------------------------------------------------------


def test_streamer_handles_tricky_strings_and_items_bigger_than_a_chunk() -> None:
    items = [
        {"text": "brackets ] [ } { and commas , , inside", "q": 'escaped \\" quote \\\\'},
        "a string with \"quotes\" and \\ backslashes ]",
        {"big": "x" * 5000, "nested": [[[]], {"a": [1, 2, {"b": "]"}]}]},
        123456789,
        -1.5e-7,
        True,
        None,
        "emoji \U0001f426 and é",
        [],
    ]
    text = json.dumps(items, ensure_ascii=False)
    for chunk_size in (1, 2, 3, 7, 64, 4096):
        assert list(iter_array(io.BytesIO(text.encode()), "x.json", chunk_size=chunk_size)) == items
        assert list(iter_array(io.StringIO(text), "x.json", chunk_size=chunk_size)) == items


def test_streamer_reads_as_it_goes() -> None:
    data = json.dumps([{"n": i, "pad": "p" * 1000} for i in range(200)]).encode()
    stream = CountingStream(data)
    items = iter_array(stream, "x.json", chunk_size=4096)
    assert next(items)["n"] == 0
    assert stream.taken < len(data) // 10
    assert sum(1 for _ in items) == 199


def test_streamer_reports_bad_json_with_its_item_number() -> None:
    with pytest.raises(InputFileError, match="item 2 is not valid JSON"):
        list(iter_array(io.BytesIO(b'[{"a": 1}, {"a": nope}, {"a": 3}]' + b" " * 100), "x.json", chunk_size=8))
    with pytest.raises(InputFileError, match="expected ',' or ']' after item 1"):
        list(iter_array(io.BytesIO(b'[{"a": 1} {"a": 2}]'), "x.json", chunk_size=4))
    assert list(iter_array(io.BytesIO(b'\xef\xbb\xbf [ ]'), "x.json")) == []


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=examples(150), deadline=None)
@given(items=st.lists(json_values, max_size=6), chunk_size=st.integers(1, 40), indent=st.sampled_from([None, 1]))
def test_streamer_matches_json_loads(items: list[Any], chunk_size: int, indent: int | None) -> None:
    text = json.dumps(items, indent=indent, ensure_ascii=False)
    assert list(iter_array(io.BytesIO(text.encode("utf-8", "surrogatepass")), "x", chunk_size=chunk_size)) == json.loads(text)


# -- size --------------------------------------------------------------------------------------


def test_a_ten_megabyte_message_is_imported_whole_and_not_copied(tmp_path: Path) -> None:
    big = "word " * 2_000_000
    item = gpt_linear("big", "Big", [("user", big), ("assistant", "That is long.")])
    conversation = chatgpt.conversation(item, 1)
    assert isinstance(conversation, ImportedConversation)
    assert conversation.exchanges[0].prompt is item["mapping"]["big-0"]["message"]["content"]["parts"][0]
    path = write_zip(tmp_path / "export.zip", {"conversations.json": [item]})
    [read] = read_all(path)
    assert pairs(read) == [(big, "That is long.")]


def test_a_file_cut_inside_a_character_says_it_is_truncated() -> None:
    with pytest.raises(InputFileError, match="ends in the middle of a character at byte 5"):
        list(iter_array(io.BytesIO('["caf\u00e9'.encode()[:-1]), "x.json", chunk_size=2))
