"""Issue 23, break 5: an imported value never breaks stats, and a bad value already stored is survived.

`"total_chunks": "many"` imported fine, then `--vector-store-stats`, `/vstats` and MCP
`memory_stats` failed with ValueError (a list gave TypeError; 1e18 invented a partial document).
Import now checks every metadata key ocat reads, by type and range, before writing anything;
and every reader survives what an older ocat or another Chroma client may have stored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ocat.memory import MemoryStore, partial_documents
from ocat.records import DocumentChunk
from ocat.operations.lookup import record_details
from tests.support.cli import Cli, stats

BAD_VALUES: list[tuple[dict[str, Any], str]] = [
    ({"total_chunks": "many"}, '"total_chunks" must be a whole number from 1 to'),
    ({"total_chunks": [1]}, '"total_chunks" must be a whole number'),
    ({"total_chunks": 10**18}, '"total_chunks" must be a whole number'),
    ({"total_chunks": 1e18}, '"total_chunks" must be a whole number'),
    ({"total_chunks": 0}, '"total_chunks" must be a whole number'),
    ({"total_chunks": True}, '"total_chunks" must be a whole number'),
    ({"total_chunks": 3, "chunk_index": 3}, '"chunk_index" must be a whole number from 0 to 2'),
    ({"chunk_index": -1}, '"chunk_index" must be a whole number'),
    ({"date_added": "yesterday"}, '"date_added" must be a date'),
    ({"date_added": 1e300}, '"date_added" must be a date'),
    ({"document_id": 12}, '"document_id" must be a string'),
    ({"manual_entry": "yes"}, '"manual_entry" must be true or false'),
]


def document_line(metadata: dict[str, Any], record_id: str = "doc-1") -> str:
    return json.dumps({"kind": "document", "id": record_id, "text": "the shed key hangs by the door",
                       "metadata": metadata})


@pytest.mark.parametrize(("metadata", "said"), BAD_VALUES)
def test_import_refuses_a_value_of_a_key_ocat_reads(store: MemoryStore, tmp_path: Path,
                                                    metadata: dict[str, Any], said: str) -> None:
    from ocat.errors import InputFileError
    from ocat.memory.storage.export_import import import_memory

    good = document_line({"total_chunks": 1, "chunk_index": 0, "document_id": "d1"}, "doc-good")
    path = tmp_path / "memory.jsonl"
    path.write_text(good + "\n" + document_line(metadata) + "\n")
    with pytest.raises(InputFileError, match=r"memory\.jsonl:2: metadata .*nothing was imported") as refused:
        import_memory(store, path)
    assert said in str(refused.value)
    assert store.count("document") == 0  # the whole file or nothing


def test_values_ocat_writes_itself_still_import(store: MemoryStore, tmp_path: Path) -> None:
    from ocat.memory.storage.export_import import import_memory

    metadata = {"kind": "document", "source": "cli", "source_file": "/notes/a.md", "chunk_index": 1,
                "total_chunks": 2, "manual_entry": False, "content_hash": "ab", "document_id": "d1",
                "date_added": 1764000000.5, "section": "goals", "project": ["x", "y"]}
    path = tmp_path / "memory.jsonl"
    path.write_text(document_line(metadata) + "\n")
    assert import_memory(store, path).added == 1


@pytest.mark.parametrize("bad", ["many", [1, 2], 10**18, 1e18, -3, True])
def test_readers_survive_a_bad_value_already_stored(store: MemoryStore, bad: Any) -> None:
    # Written straight to the store, as an older ocat or another Chroma client could have.
    chunk = DocumentChunk("doc-x-0", "a chunk from elsewhere", {"document_id": "x", "total_chunks": bad,
                                                                "chunk_index": bad, "source_file": "/x.md"})
    store.add_chunks([chunk])
    assert partial_documents(store) == []  # an unusable count is unknown, not partial
    rows = dict(record_details(store.get("doc-x-0")))  # type: ignore[arg-type]
    assert "part" not in rows and rows["id"] == "doc-x-0"


def test_a_partial_document_is_still_found_without_the_lexical_index(store: MemoryStore) -> None:
    chunks = [DocumentChunk(f"doc-y-{i}", f"part {i} of the boiler manual", {"document_id": "y", "total_chunks": 3,
                                                                              "chunk_index": i, "source_file": "/y.md"})
              for i in range(2)]
    store.add_chunks(chunks)
    store.lexical.clear("document")  # derived: stats must not need it
    [partial] = partial_documents(store)
    assert (partial.document_id, partial.stored_chunks, partial.total_chunks, partial.file) == ("y", 2, 3, "/y.md")


# -- as a user meets it: the CLI and MCP ------------------------------------------------------------


@pytest.mark.slow
def test_the_cli_refuses_the_file_and_keeps_what_was_stored(cli: Cli, tmp_path: Path) -> None:
    note = tmp_path / "note.txt"
    note.write_text("the bike lock code is 4471")
    assert cli("--add-to-vector-store", str(note)).returncode == 0
    path = tmp_path / "memory.jsonl"
    path.write_text(document_line({"total_chunks": "many"}) + "\n")
    run = cli("--import-memory", str(path))
    assert run.returncode != 0
    assert 'memory.jsonl:1: metadata "total_chunks" must be a whole number' in run.stderr
    assert "nothing was imported" in run.stderr
    assert stats(cli)["documents"] == 1


@pytest.mark.slow
@pytest.mark.anyio
async def test_stats_survive_bad_values_stored_by_another_client(cli: Cli, real_embedder: Any) -> None:
    from ocat.memory import StoreLocation
    from tests.cli.test_mcp import call, mcp_session

    store = MemoryStore.open(StoreLocation(path=cli.store_path), real_embedder, name="default")
    store.add_chunks([
        DocumentChunk(f"doc-z-{i}", f"chunk {i}", {"document_id": f"z{i}", "total_chunks": bad, "chunk_index": 0})
        for i, bad in enumerate(["many", [1], 10**18, 1e18])
    ])
    store.close()
    result = stats(cli)
    assert result["documents"] == 4 and result["partial_documents"] == 0
    async with mcp_session(cli) as session:
        reported = await call(session, "memory_stats", {})
        assert reported["stores"][0]["partial_documents"] == 0
