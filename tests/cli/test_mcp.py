"""`ocat mcp` driven by the MCP SDK's own stdio client, against a private store and the real model."""

from __future__ import annotations

import json
import os
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator

import pytest

from tests.support.warm_start import python_command
from tests.support.cli import Cli
from tests.support.window import start_window
from ocat.mcp_server.server import DEPRECATED_NAMES

pytestmark = pytest.mark.anyio

BILLING = "We chose PostgreSQL 16 for the billing ledger because it needs real transactions."
CAT = "The cat is called Miso and eats salmon on Sundays."


@asynccontextmanager
async def mcp_session(cli: Cli, *args: str, errlog: Path | None = None) -> AsyncIterator[Any]:
    """An initialised MCP client session with `python -m ocat mcp ARGS` on the test's store."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    env = {**os.environ, "OCAT_VECTOR_STORE_PATH": str(cli.store_path)}
    command = python_command("-m", "ocat", "mcp", *args, env=env)
    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=str(cli.home))
    log_path = errlog or cli.home / "mcp-stderr.log"
    with log_path.open("a") as log:
        async with stdio_client(params, errlog=log) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


async def call(session: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A tool's structured result; fails the test if the call was an error."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


async def error_of(session: Any, tool: str, arguments: dict[str, Any]) -> str:
    """The text of a call that must be an error result."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error, f"{tool}({arguments}) should have failed: {result.content}"
    return result.content[0].text


def exchange_line(i: int, thread: str, prompt: str, answer: str, day: str) -> str:
    from datetime import datetime

    stamp = datetime.fromisoformat(f"{day}T12:00").timestamp() + i
    record = {
        "kind": "exchange", "exchange_id": f"ex-{i}", "thread_id": thread, "session_id": f"s-{thread}",
        "user_prompt": prompt, "assistant_response": answer, "timestamp": stamp, "prior_exchange_ids": [],
        "thread_session_id": f"{thread}_s-{thread}", "thread_continuation_seq": 0,
    }
    return json.dumps(record)


async def test_the_tools_are_listed_with_closed_schemas(cli: Cli) -> None:
    async with mcp_session(cli) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == {"search_memory", "remember", "forget_memory", "memory_stats", "memory_wake", "pin_memory",
                          "unpin_memory", "memory_pins", *DEPRECATED_NAMES}
    for old, new in DEPRECATED_NAMES.items():  # the old names, for one release: the same tool, said deprecated
        assert tools[old].input_schema == tools[new].input_schema
        assert tools[old].description == f"Deprecated: the old name of {new}, kept for one release. " \
            f"{tools[new].description}"
    search = tools["search_memory"].input_schema
    assert search["required"] == ["query"] and search["additionalProperties"] is False
    assert {"query", "k", "source", "thread_id", "session_id", "kind", "since", "until", "where", "project"} == set(
        search["properties"])
    assert tools["search_memory"].annotations.read_only_hint is True
    assert tools["forget_memory"].annotations.destructive_hint is True


async def test_the_old_names_still_save_search_pin_and_forget(cli: Cli) -> None:
    """A client written for the old names (memory_save, memory_search, ...) works for one more release."""
    async with mcp_session(cli) as session:
        old = (await call(session, "memory_save", {"content": CAT}))["ids"][0]
        new = (await call(session, "remember", {"content": BILLING}))["ids"][0]
        for name in ("memory_search", "search_memory"):
            found = await call(session, name, {"query": "which database does billing use?", "k": 3})
            assert found["results"][0]["id"] == new, name
        await call(session, "memory_pin", {"id": old})
        assert [p["id"] for p in (await call(session, "memory_pins", {}))["pins"]] == [old]
        await call(session, "memory_unpin", {"id": old})
        gone = await call(session, "memory_forget", {"id": old, "confirm": "CONFIRM"})
        assert gone["deleted_ids"] == [old]


async def test_save_then_search_with_scores_metadata_and_filters(cli: Cli, tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    history.write_text(
        "\n".join(
            [
                exchange_line(1, "thread-a", "Where do we deploy the API?", "To the Frankfurt cluster.", "2026-03-02"),
                exchange_line(2, "thread-b", "Where do we deploy the workers?", "To the Dublin cluster.", "2026-05-10"),
            ]
        )
        + "\n"
    )
    assert cli("--import-memory", str(history)).returncode == 0
    async with mcp_session(cli) as session:
        saved = await call(session, "remember", {"content": BILLING, "source": "decisions",
                                                    "metadata": {"project": "billing", "year": 2026}})
        assert saved["added_chunks"] == 1 and saved["already_stored"] is False and len(saved["ids"]) == 1
        await call(session, "remember", {"content": CAT})
        again = await call(session, "remember", {"content": CAT})
        assert again["already_stored"] is True and again["added_chunks"] == 0

        found = await call(session, "search_memory", {"query": "which database does billing use?", "k": 3})
        top = found["results"][0]
        assert top["id"] == saved["ids"][0] and top["text"] == BILLING and top["kind"] == "document"
        assert 0.0 <= top["score"] <= 1.0 and top["admitted"] is True
        assert top["metadata"]["source"] == "decisions" and top["metadata"]["project"] == "billing"
        assert top["store"] == "default" and top["date"]

        async def ids(**arguments: Any) -> list[str]:
            result = await call(session, "search_memory", {"query": "where do we deploy", "k": 10, **arguments})
            return [hit["id"] for hit in result["results"]]

        assert await ids(where={"project": "billing"}) == saved["ids"]
        assert await ids(where={"year": "2026"}) == saved["ids"]  # typed as text, saved as a number
        assert await ids(source="decisions") == saved["ids"]
        assert set(await ids(source="chat")) == {"ex-1", "ex-2"}
        assert set(await ids(kind="exchange")) == {"ex-1", "ex-2"}
        assert await ids(thread_id="thread-b") == ["ex-2"]
        assert await ids(kind="exchange", since="2026-04-01") == ["ex-2"]
        assert await ids(kind="exchange", until="2026-03-02") == ["ex-1"]  # a bare date includes the day
        assert await ids(kind="exchange", since="2026-06-01") == []
        assert await ids(session_id="s-thread-a", kind="document") == []

        stats = await call(session, "memory_stats", {})
    assert stats["stores"][0]["documents"] == 2 and stats["stores"][0]["exchanges"] == 2
    assert stats["stores"][0]["document_chunks"] == 2  # two short notes: a chunk each
    assert stats["writable"] is True and stats["available_stores"] == ["default"]


async def test_forget_previews_and_deletes_only_with_confirm(cli: Cli) -> None:
    async with mcp_session(cli) as session:
        cat = (await call(session, "remember", {"content": CAT}))["ids"][0]
        billing = (await call(session, "remember", {"content": BILLING}))["ids"][0]

        preview = await call(session, "forget_memory", {"query": "what is the cat called?"})
        assert preview["deleted"] is False and [t["id"] for t in preview["would_delete"]] == [cat]
        assert "CONFIRM" in preview["message"]
        assert "must be exactly" in await error_of(session, "forget_memory", {"query": "the cat", "confirm": "yes"})
        assert (await call(session, "memory_stats", {}))["stores"][0]["documents"] == 2

        nothing = await call(session, "forget_memory", {"query": "quantum chromodynamics lecture schedule"})
        assert nothing["would_delete"] == []

        done = await call(session, "forget_memory", {"query": "what is the cat called?", "confirm": "CONFIRM"})
        assert done == {"deleted": True, "deleted_ids": [cat], "count": 1}
        by_id = await call(session, "forget_memory", {"id": billing[:12], "confirm": "CONFIRM"})
        assert by_id["deleted_ids"] == [billing]
        assert (await call(session, "memory_stats", {}))["stores"][0]["documents"] == 0


async def test_bad_input_is_an_error_result_and_the_server_carries_on(cli: Cli) -> None:
    errlog = cli.home / "stderr.log"
    async with mcp_session(cli, errlog=errlog) as session:
        cases = [
            ("search_memory", {}, "query"),
            ("search_memory", {"query": ""}, "non-empty"),
            ("search_memory", {"query": "x", "k": 0}, "minimum"),
            ("search_memory", {"query": "x", "k": "five"}, "integer"),
            ("search_memory", {"query": "x", "filter": {"a": 1}}, "'filter' was unexpected"),
            ("search_memory", {"query": "x", "kind": "email"}, "email"),
            ("search_memory", {"query": "x", "since": "last tuesday"}, "since: expected a date"),
            ("search_memory", {"query": "x", "until": "0001-01-01"}, "until: '0001-01-01' is out of range"),
            ("search_memory", {"query": "x", "where": {"ocd_number": 10**30}}, "where: ocd_number: 1000"),
            ("remember", {"content": "x", "metadata": {"n": 10**30}}, "whole numbers go from"),
            ("search_memory", {"query": "x", "where": {"a": [1, 2]}}, "where.a"),
            ("search_memory", {"query": "x", "where": {"bad key!": 1}}, "not a metadata key"),
            ("remember", {"content": "   "}, "non-empty"),
            ("remember", {"content": "x", "metadata": {"source": "a"}}, "set by ocat itself"),
            ("remember", {"content": "x", "source": "chat"}, "reserved"),
            ("remember", {"content": "x", "source": "bad\nlabel"}, "source must be"),
            ("forget_memory", {}, "either query or id"),
            ("forget_memory", {"query": "x", "id": "y"}, "either query or id"),
            ("forget_memory", {"id": "no-such-id"}, "no memory with id no-such-id"),
            ("memory_stats", {"verbose": True}, "'verbose' was unexpected"),
        ]
        for tool, arguments, expected in cases:
            assert expected in await error_of(session, tool, arguments), (tool, arguments)
        unknown = await session.call_tool("memory_explode", {})
        assert unknown.is_error and "Unknown tool" in unknown.content[0].text
        assert (await call(session, "memory_stats", {}))["stores"][0]["documents"] == 0
    assert "Traceback" not in errlog.read_text()


async def test_other_ocat_processes_use_the_store_through_the_mcp_server(cli: Cli) -> None:
    async with mcp_session(cli) as session:
        await call(session, "remember", {"content": BILLING})
        # The MCP server owns the store and serves it: the CLI goes through it, no waiting.
        query = cli("--query-vector-store", "billing database", "--output", "json")
        assert query.returncode == 0, query.stderr
        assert query.json()["result"]["results"][0]["text"] == BILLING
        notes = cli.home / "n.md"
        notes.write_text(CAT)
        assert cli("--add-to-vector-store", str(notes)).returncode == 0
        found = await call(session, "search_memory", {"query": "what does the cat eat?", "k": 1})
        assert found["results"][0]["text"] == CAT


def test_mcp_command_line_errors(cli: Cli) -> None:
    helped = cli("mcp", "--help")
    assert helped.returncode == 0 and "search_memory" in helped.stdout
    unknown = cli("mcp", "--bogus")
    assert unknown.returncode == 2 and "--bogus" in unknown.stderr
    bad_store = cli("mcp", "--store", "no spaces please")
    assert bad_store.returncode == 2 and "not a store name" in bad_store.stderr and bad_store.stdout == ""
    disabled = cli("mcp", "--set", "vector_store.enabled=false")
    assert disabled.returncode == 2 and "disabled" in disabled.stderr
    bad_config = cli("mcp", "--set", "vector_store.memory_threshold=7")
    assert bad_config.returncode == 3 and bad_config.stdout == ""
    # The word only counts first; elsewhere it is an ordinary (rejected) argument.
    assert cli("--vector-store-stats", "mcp").returncode == 2


async def test_several_stores_are_searched_together_and_never_written(cli: Cli) -> None:
    async with mcp_session(cli, "--store", "work") as session:
        await call(session, "remember", {"content": BILLING})
    async with mcp_session(cli, "--store", "personal") as session:
        await call(session, "remember", {"content": CAT})
    async with mcp_session(cli, "--store", "work,personal") as session:
        found = await call(session, "search_memory", {"query": "billing database or the cat's name", "k": 5})
        assert {(hit["store"], hit["text"]) for hit in found["results"]} == {("work", BILLING), ("personal", CAT)}
        assert found["stores"] == ["work", "personal"]
        refused = await error_of(session, "remember", {"content": "a new note"})
        assert "writes to one only" in refused
        assert "writes to one only" in await error_of(session, "forget_memory", {"query": "cat"})
        stats = await call(session, "memory_stats", {})
    assert stats["writable"] is False and [s["collection"] for s in stats["stores"]] == ["work", "personal"]
    assert [s["documents"] for s in stats["stores"]] == [1, 1]


async def test_without_the_embedding_model_a_search_is_an_error_result_and_stats_still_work(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No model in that folder, and its download refused (conftest points it at a closed port).
    monkeypatch.setenv("OCAT_EMBEDDING_MODEL_PATH", str(cli.home / "no-model-here"))
    errlog = cli.home / "stderr.log"
    async with mcp_session(cli, errlog=errlog) as session:
        for _ in range(2):  # each call tries again, and says why it cannot
            message = await error_of(session, "search_memory", {"query": "anything"})
            assert "embedding model" in message and "ocat --fetch-model" in message
        stats = await call(session, "memory_stats", {})
    assert [s["exchanges"] for s in stats["stores"]] == [0]
    assert "Traceback" not in errlog.read_text()


async def test_when_the_chat_that_owned_the_store_exits_the_server_takes_over(cli: Cli) -> None:
    window = start_window(cli)  # a stand-in for a chat window: it owns and serves the store
    try:
        async with mcp_session(cli) as session:
            await call(session, "remember", {"content": BILLING})  # through the window's server
            assert window.stdin is not None
            window.stdin.write("quit\n")
            window.stdin.flush()
            assert window.wait(timeout=60) == 0
            # The next call finds the server gone, opens the store again (now as its owner), and works.
            await call(session, "remember", {"content": CAT})
            found = await call(session, "search_memory", {"query": "what does the cat eat?", "k": 2})
            assert {hit["text"] for hit in found["results"]} == {CAT, BILLING}
        assert "the store's owner went away" in (cli.home / "mcp-stderr.log").read_text()
    finally:
        window.kill()
        window.wait()
