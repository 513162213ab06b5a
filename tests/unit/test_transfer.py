"""Export and import of memory as JSON Lines."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import pytest

from ocat.config.loading import shipped_settings
from ocat.errors import InputFileError
from ocat.memory import MemoryStore, RetrievalLimits, StoreLocation, add_text, retrieve
from ocat.memory.storage.export_import import export_memory, import_memory
from ocat.records import Exchange
from tests.support.fakes import FakeEmbedder

OPTIONS = replace(shipped_settings().chunking, chunk_size=120, chunk_overlap=10, max_chunk_size=200)


def populate(store: MemoryStore) -> None:
    store.add_exchanges(
        Exchange(
            user_prompt=f"question {i}",
            assistant_response=f"answer {i}",
            thread_id="thread-a" if i < 3 else "thread-b",
            session_id="session-1",
            timestamp=100.0 + i,
            prior_exchange_ids=("x", "y") if i == 2 else (),
            thread_continuation_seq=i % 2,
        )
        for i in range(5)
    )
    add_text(store, "A first manual memory about gardening and tomatoes. " * 5, OPTIONS)


def export_lines(store: MemoryStore) -> list[dict]:
    buffer = io.StringIO()
    export_memory(store, buffer)
    return [json.loads(line) for line in buffer.getvalue().splitlines()]


def test_export_import_export_round_trip(store: MemoryStore, tmp_path: Path) -> None:
    populate(store)
    first = export_lines(store)
    path = tmp_path / "memory.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in first) + "\n")
    target = MemoryStore.open(StoreLocation(path=tmp_path / "other"), FakeEmbedder(), name="copy")
    outcome = import_memory(target, path)
    assert (outcome.exchanges, outcome.added) == (5, len(first))
    second = export_lines(target)
    key = lambda r: r.get("exchange_id") or r["id"]  # noqa: E731
    assert sorted(first, key=key) == sorted(second, key=key)
    exchange_line = next(r for r in first if r["kind"] == "exchange" and r["prior_exchange_ids"])
    assert exchange_line["prior_exchange_ids"] == ["x", "y"]
    assert set(exchange_line) == {
        "kind", "exchange_id", "thread_id", "session_id", "user_prompt", "assistant_response",
        "timestamp", "prior_exchange_ids", "thread_session_id", "thread_continuation_seq",
    }


def test_import_twice_adds_nothing_the_second_time(store: MemoryStore, tmp_path: Path) -> None:
    populate(store)
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in export_lines(store)))
    target = MemoryStore.open(StoreLocation(path=tmp_path / "t"), FakeEmbedder(), name="t")
    import_memory(target, path)
    assert import_memory(target, path).added == 0
    assert target.count("exchange") == 5


def test_import_re_embeds_with_the_target_model(store: MemoryStore, tmp_path: Path) -> None:
    populate(store)
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in export_lines(store)))
    other_model = FakeEmbedder(name="another-model", dimensions=32)
    target = MemoryStore.open(StoreLocation(path=tmp_path / "t"), other_model, name="t")
    import_memory(target, path)
    assert target.exchanges.metadata["embedding_model"] == "another-model"
    top_exchange = RetrievalLimits(exchange_results=1, document_results=0, exchange_threshold=0, document_threshold=0)
    assert retrieve(target, "question 3", top_exchange)[0].metadata["user_prompt"] == "question 3"


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ("{not json", "not valid JSON"),
        ('["a list"]', "expected a JSON object"),
        ('{"kind": "exchange", "exchange_id": "e"}', "missing"),
        ('{"kind": "mystery"}', "unknown kind"),
        ('{"kind": "document", "id": "d", "text": ""}', "text"),
    ],
)
def test_a_malformed_line_is_named_and_nothing_is_written(
    store: MemoryStore, tmp_path: Path, bad_line: str, message: str
) -> None:
    good = {
        "kind": "exchange", "exchange_id": "e1", "thread_id": "t", "session_id": "s", "user_prompt": "p",
        "assistant_response": "r", "timestamp": 1.0, "prior_exchange_ids": [], "thread_session_id": "t_s",
        "thread_continuation_seq": 0,
    }
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(good | {"exchange_id": "e2"}) + "\n" + bad_line + "\n")
    with pytest.raises(InputFileError, match=rf"bad.jsonl:3: .*{message}"):
        import_memory(store, path)
    assert store.count("exchange") == 0
