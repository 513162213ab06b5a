"""`--import-memory` checks every record fully before the first write: a file is imported whole
or not at all, and what it imports exports back exactly."""

from __future__ import annotations

import io
import itertools
import json
import math
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ocat.errors import InputFileError
from ocat.memory import MemoryStore, RetrievalLimits, retrieve
from ocat.memory.storage.export_import import export_memory, import_memory
from ocat.records import Exchange, SearchHit
from ocat.text.terminal import local_time
from tests.support.warm_start import python_command
from tests.support.cli import Cli, stats
from tests.support.data import exchange_records
from tests.support.window import start_window
from tests.support.examples import examples

# More than one write batch (256) of good records comes before the bad line, so an import that
# checked lines only as it wrote them would have stored the first batch.
GOOD_LINES = 300
INT64_MAX = 2**63 - 1


def exchange_line(i: int, **changes: Any) -> dict[str, Any]:
    record = {
        "kind": "exchange", "exchange_id": f"ex-{i}", "thread_id": "t", "session_id": "s",
        "user_prompt": f"question {i}", "assistant_response": f"answer {i}", "timestamp": 1_700_000_000.0 + i,
        "prior_exchange_ids": [], "thread_session_id": "t_s", "thread_continuation_seq": 0,
    }
    return record | changes


def document_line(i: int, **changes: Any) -> dict[str, Any]:
    return {"kind": "document", "id": f"doc-{i}", "text": f"note number {i}", "metadata": {"source": "cli"}} | changes


def write_file(path: Path, good: int, last: str | dict[str, Any]) -> Path:
    """`good` valid document lines, then `last` (a raw line, or a record written as JSON)."""
    lines = [json.dumps(document_line(i)) for i in range(good)]
    lines.append(last if isinstance(last, str) else json.dumps(last))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def assert_refused(store: MemoryStore, path: Path, line: int, needle: str) -> None:
    with pytest.raises(InputFileError) as caught:
        import_memory(store, path)
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}: "), message
    assert needle in message, message
    assert message.endswith("; nothing was imported")
    assert (store.count("exchange"), store.count("document")) == (0, 0)


def export_lines(store: MemoryStore) -> list[dict[str, Any]]:
    buffer = io.StringIO()
    export_memory(store, buffer)
    # Split on newlines only: str.splitlines would also split on U+2028 or U+001C inside a text.
    return [json.loads(line) for line in buffer.getvalue().split("\n") if line]


# -- 1. metadata is optional -----------------------------------------------------------------


@pytest.mark.parametrize("metadata", ["absent", None, {}])
def test_a_document_without_metadata_is_imported_and_exports_back(
    store: MemoryStore, tmp_path: Path, metadata: Any
) -> None:
    record: dict[str, Any] = {"kind": "document", "id": "bare", "text": "a note with no metadata at all"}
    if metadata != "absent":
        record["metadata"] = metadata
    # Alone (a write of chunks that have no metadata at all), then among chunks that have some.
    assert import_memory(store, write_file(tmp_path / "one.jsonl", 0, record)).added == 1
    assert import_memory(store, write_file(tmp_path / "many.jsonl", 300, record | {"id": "bare-2"})).added == 301
    exported = {r["id"]: r for r in export_lines(store)}
    assert exported["bare"] == {"kind": "document", "id": "bare", "text": record["text"], "metadata": {}}
    assert exported["bare-2"]["metadata"] == {}
    top_document = RetrievalLimits(exchange_results=0, document_results=1, exchange_threshold=0, document_threshold=0)
    assert retrieve(store, "a note with no metadata", top_document)[0].id in {"bare", "bare-2"}


# -- 2, 5. metadata Chroma would refuse, drop or alter -----------------------------------------


@pytest.mark.parametrize(
    ("metadata", "needle"),
    [
        ({"tags": [1, "two"]}, 'metadata "tags" is a list mixing integers and strings'),
        ({"n": [1, 2.5]}, 'metadata "n" is a list mixing floats and integers'),
        ({"": "x"}, 'metadata key "" is empty'),
        ({"chroma:document": "x"}, "metadata key \"chroma:document\" starts with 'chroma:', which Chroma reserves"),
        ({"chroma:note": "x"}, "starts with 'chroma:'"),
        ({"#tag": "x"}, "starts with '#'"),
        ({"$and": "x"}, "starts with '$'"),
        ({"tags": []}, 'metadata "tags" is an empty list'),
        ({"who": None}, 'metadata "who" is null'),
        ({"deep": {"a": 1}}, 'metadata "deep" is an object'),
        ({"deep": [[1]]}, 'metadata "deep" (in the list) is a list inside a list'),
        ({"score": math.nan}, 'metadata "score" is NaN, which Chroma cannot store'),
        ({"score": math.inf}, 'metadata "score" is Infinity'),
        ({"scores": [1.0, math.nan]}, 'metadata "scores" (in the list) is NaN'),
        ({"big": INT64_MAX + 1}, 'metadata "big" is 9223372036854775808, beyond the 64-bit integers'),
        ({"big": -INT64_MAX - 2}, "beyond the 64-bit integers"),
        ({"big": [10**30]}, "beyond the 64-bit integers"),
        pytest.param({"big": 10**400}, "(401 characters), beyond the 64-bit integers", id="400-digits"),
        ({"title": "x\udfffy"}, 'metadata "title" holds a lone surrogate (\\udfff at character 2)'),
        ({"ti\udfffle": "x"}, 'metadata key "ti\\udfffle" holds a lone surrogate'),
        ({"tags": ["ok", "\ud800"]}, "lone surrogate (\\ud800"),
    ],
)
def test_metadata_chroma_would_refuse_or_alter_is_refused_before_any_write(
    store: MemoryStore, tmp_path: Path, metadata: dict[str, Any], needle: str
) -> None:
    path = write_file(tmp_path / "m.jsonl", GOOD_LINES, document_line(GOOD_LINES, metadata=metadata))
    assert_refused(store, path, GOOD_LINES + 1, needle)


def test_the_largest_and_smallest_64_bit_integers_are_kept_exactly(store: MemoryStore, tmp_path: Path) -> None:
    metadata = {"big": INT64_MAX, "small": -INT64_MAX - 1, "list": [INT64_MAX, 0], "odd key #$": 1, "x#": True}
    path = write_file(tmp_path / "m.jsonl", 0, document_line(0, metadata=metadata))
    import_memory(store, path)
    assert export_lines(store)[0]["metadata"] == dict(sorted(metadata.items()))


# -- 3. lone surrogates ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("record", "needle"),
    [
        (document_line(GOOD_LINES, text="broken \udfff text"), "text holds a lone surrogate (\\udfff at character 8)"),
        (document_line(GOOD_LINES, id="doc-\udfff"), "id holds a lone surrogate"),
        (exchange_line(1, user_prompt="\udfff"), "user_prompt holds a lone surrogate (\\udfff at character 1)"),
        (exchange_line(1, assistant_response="ok \ud83d"), "assistant_response holds a lone surrogate (\\ud83d"),
        (exchange_line(1, prior_exchange_ids=["a", "\udc80"]), "prior_exchange_ids holds a lone surrogate"),
    ],
)
def test_a_lone_surrogate_is_refused_with_its_line(
    store: MemoryStore, tmp_path: Path, record: dict[str, Any], needle: str
) -> None:
    # json.dumps writes a lone surrogate as an escape ("\udfff"), as a hostile or broken file would.
    path = write_file(tmp_path / "m.jsonl", GOOD_LINES, record)
    assert_refused(store, path, GOOD_LINES + 1, needle)


def test_a_surrogate_pair_is_an_ordinary_character(store: MemoryStore, tmp_path: Path) -> None:
    path = write_file(tmp_path / "m.jsonl", 0, '{"kind": "document", "id": "cat", "text": "a cat \\ud83d\\ude3a"}')
    import_memory(store, path)
    assert export_lines(store)[0]["text"] == "a cat \U0001f63a"


# -- 4. timestamps -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ("NaN", "timestamp NaN is not a date between the years 1 and 9999"),
        ("Infinity", "timestamp Infinity is not a date"),
        ("-Infinity", "timestamp -Infinity is not a date"),
        ("1e400", "timestamp Infinity is not a date"),
        ("1e300", "timestamp 1e+300 is not a date"),
        ("-1e20", "timestamp -1e+20 is not a date"),
        ("253402300800", "timestamp 253402300800 is not a date"),  # 10000-01-01
        pytest.param("1" * 400, "(400 characters) is not a date", id="400-digits"),
        # Python refuses to read an integer of more than 4,300 digits.
        pytest.param("1" * 5000, "not valid JSON", id="5000-digits"),
        ("true", "timestamp must be a number"),
        ('"2024-01-01"', "timestamp must be a number"),
    ],
)
def test_a_timestamp_no_date_can_hold_is_refused(store: MemoryStore, tmp_path: Path, raw: str, needle: str) -> None:
    line = json.dumps(exchange_line(1, timestamp=0)).replace('"timestamp": 0', f'"timestamp": {raw}')
    assert_refused(store, write_file(tmp_path / "m.jsonl", GOOD_LINES, line), GOOD_LINES + 1, needle)


@pytest.mark.parametrize("timestamp", [0, -86400 * 365 * 1000, 1_700_000_000, 253_000_000_000.5])
def test_timestamps_from_year_1_to_9999_are_imported(store: MemoryStore, tmp_path: Path, timestamp: float) -> None:
    import_memory(store, write_file(tmp_path / "m.jsonl", 0, exchange_line(1, timestamp=timestamp)))
    assert export_lines(store)[0]["timestamp"] == timestamp


def test_a_continuation_number_beyond_64_bits_is_refused(store: MemoryStore, tmp_path: Path) -> None:
    path = write_file(tmp_path / "m.jsonl", GOOD_LINES, exchange_line(1, thread_continuation_seq=2**64))
    assert_refused(store, path, GOOD_LINES + 1, "thread_continuation_seq 18446744073709551616 is beyond the 64-bit")


def test_deeply_nested_json_is_refused_not_a_crash(store: MemoryStore, tmp_path: Path) -> None:
    path = write_file(tmp_path / "m.jsonl", GOOD_LINES, "[" * 100_000 + "]" * 100_000)
    assert_refused(store, path, GOOD_LINES + 1, "nested too deeply")


@pytest.mark.parametrize(
    "bad", [math.nan, math.inf, -math.inf, 1e300, -1e20, 10**400, -(10**400), "soon", None, True],
    ids=["nan", "inf", "-inf", "1e300", "-1e20", "400-digits", "-400-digits", "string", "none", "bool"],
)
def test_local_time_shows_a_bad_stored_time_as_missing(bad: Any) -> None:
    assert local_time(bad) == "-"
    assert local_time(bad, missing="unknown date") == "unknown date"
    hit = SearchHit(id="x", kind="exchange", score=1.0, text="t", metadata={"timestamp": bad})
    assert hit.when() == "-"


def test_a_store_holding_an_exchange_without_a_timestamp_still_exports(store: MemoryStore) -> None:
    # What an older ocat stored for a NaN timestamp: Chroma drops the key, and every later
    # read of the exchange (export, /history, /threads) failed with KeyError.
    store.add_exchanges([Exchange("q", "a", "t", "s", exchange_id="old", timestamp=math.nan)])
    assert "timestamp" not in dict(store.iter_metadata("exchange"))["old"]
    [line] = export_lines(store)
    assert line["exchange_id"] == "old" and line["timestamp"] == 0.0
    assert local_time(store.get_thread("t")[0].timestamp) == "-"


# -- the property: whole or nothing, and an exact round trip ----------------------------------

_KEY_START = st.characters(codec="utf-8", exclude_characters="#$")
_TEXT = st.text(st.characters(codec="utf-8"), max_size=30)
_FLOAT = st.floats(allow_nan=False, allow_infinity=False)
_INT = st.integers(-(2**63), INT64_MAX)
_SCALAR = st.one_of(_TEXT, st.booleans(), _INT, _FLOAT)
_VALUE = st.one_of(
    _SCALAR,
    st.lists(_TEXT, min_size=1, max_size=3),
    st.lists(st.booleans(), min_size=1, max_size=3),
    st.lists(_INT, min_size=1, max_size=3),
    st.lists(_FLOAT, min_size=1, max_size=3),
)
_KEY = st.builds(lambda first, rest: first + rest, _KEY_START, _TEXT).filter(lambda k: not k.startswith("chroma:"))
_METADATA = st.dictionaries(_KEY, _VALUE, max_size=4)
_EARLIEST, _LATEST = -62_135_000_000, 253_402_000_000

# Each turns a valid record into one the import must refuse: (kind it applies to, change).
_BREAKS: list[tuple[str, Any]] = [
    ("exchange", lambda r: r | {"timestamp": math.nan}),
    ("exchange", lambda r: r | {"timestamp": math.inf}),
    ("exchange", lambda r: r | {"timestamp": 1e300}),
    ("exchange", lambda r: r | {"timestamp": -(10**400)}),
    ("exchange", lambda r: r | {"user_prompt": r["user_prompt"] + "\udfff"}),
    ("exchange", lambda r: r | {"thread_continuation_seq": 2**63}),
    ("exchange", lambda r: r | {"thread_session_id": "nope"}),
    ("exchange", lambda r: {k: v for k, v in r.items() if k != "session_id"}),
    ("document", lambda r: r | {"text": "\ud800" + r["text"]}),
    ("document", lambda r: {k: v for k, v in r.items() if k != "text"}),
    ("document", lambda r: r | {"metadata": {"": 1}}),
    ("document", lambda r: r | {"metadata": {"chroma:x": 1}}),
    ("document", lambda r: r | {"metadata": {"a": [1, "b"]}}),
    ("document", lambda r: r | {"metadata": {"a": math.nan}}),
    ("document", lambda r: r | {"metadata": {"a": [math.inf]}}),
    ("document", lambda r: r | {"metadata": {"a": 2**64}}),
    ("document", lambda r: r | {"metadata": {"a": None}}),
]


@st.composite
def records(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.booleans()):
        thread, session = draw(_TEXT.filter(bool)), draw(_TEXT.filter(bool))
        return {
            "kind": "exchange", "exchange_id": "", "thread_id": thread, "session_id": session,
            "user_prompt": draw(_TEXT), "assistant_response": draw(_TEXT),
            "timestamp": draw(st.one_of(st.floats(_EARLIEST, _LATEST), st.integers(_EARLIEST, _LATEST))),
            "prior_exchange_ids": draw(st.lists(_TEXT, max_size=3)), "thread_session_id": f"{thread}_{session}",
            "thread_continuation_seq": draw(_INT),
        }
    record = {"kind": "document", "id": "", "text": draw(_TEXT.filter(str.strip))}
    metadata = draw(st.one_of(st.just("absent"), st.none(), _METADATA))
    return record if metadata == "absent" else record | {"metadata": metadata}


@st.composite
def files(draw: st.DrawFn) -> list[tuple[dict[str, Any], bool]]:
    """Records, each with whether it is valid; about half the files hold no bad record."""
    drawn = []
    for record in draw(st.lists(records(), min_size=1, max_size=8)):
        if draw(st.integers(0, 9)) == 0:
            kind, change = draw(st.sampled_from([b for b in _BREAKS if b[0] == record["kind"]]))
            drawn.append((change(record), False))
        else:
            drawn.append((record, True))
    return drawn


_runs = itertools.count()


@settings(max_examples=examples(35), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drawn=files())
def test_an_import_is_whole_or_nothing_and_exports_back_exactly(
    store: MemoryStore, tmp_path: Path, drawn: list[tuple[dict[str, Any], bool]]
) -> None:
    # One store for every example: each file's ids are new to it, and what was there stays.
    prefix = f"run{next(_runs)}-"
    for index, (record, _) in enumerate(drawn):
        record["exchange_id" if record["kind"] == "exchange" else "id"] = f"{prefix}{index}"
    path = tmp_path / "drawn.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r, _ in drawn), encoding="utf-8")
    before = (store.count("exchange"), store.count("document"))
    first_bad = next((i for i, (_, ok) in enumerate(drawn) if not ok), None)
    if first_bad is not None:
        with pytest.raises(InputFileError, match=rf"^{re.escape(str(path))}:{first_bad + 1}: .*; nothing was imported$"):
            import_memory(store, path)
        assert (store.count("exchange"), store.count("document")) == before
        return
    assert import_memory(store, path).added == len(drawn)
    exported = {r.get("exchange_id") or r["id"]: r for r in export_lines(store) if (r.get("exchange_id") or r["id"]).startswith(prefix)}
    expected = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for record in expected:
        if record["kind"] == "document":
            record["metadata"] = record.get("metadata") or {}
        else:
            record["timestamp"] = float(record["timestamp"])  # an exchange's time is a float (exported 5.0)
        assert same(exported[record.get("exchange_id") or record["id"]], record), record


def same(got: Any, want: Any) -> bool:
    """Equal, except that a float may be 2 units in the last place off: Chroma 1.5.9 keeps float
    metadata only that closely (measured: 1 in 3 random doubles moves by 1 or 2 ulps; floats
    of up to 15 significant digits between 1e-6 and 1e12, such as ocat's own millisecond
    timestamps, come back exactly)."""
    if isinstance(want, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
        return abs(got - want) <= 2 * math.ulp(want)
    if isinstance(want, list) and isinstance(got, list):
        return len(got) == len(want) and all(same(g, w) for g, w in zip(got, want))
    if isinstance(want, dict) and isinstance(got, dict):
        return got.keys() == want.keys() and all(same(got[k], want[k]) for k in want)
    return bool(got == want and type(got) is type(want))


def test_an_import_stuck_behind_another_ones_lock_gives_up_with_a_message(
    store: MemoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from filelock import FileLock

    from ocat.errors import StoreError

    monkeypatch.setattr("ocat.memory.storage.export_import.LOCK_WAIT_SECONDS", 0.2)
    path = write_file(tmp_path / "m.jsonl", 3, document_line(3))
    assert store.location.path is not None
    with FileLock(str(store.location.path / ".ocat-import-test.lock")):  # a stopped importer holds it
        with pytest.raises(StoreError, match="another import into this store has held .* running the same command"):
            import_memory(store, path)
    assert store.count("document") == 0
    assert import_memory(store, path).added == 4


# -- the command line --------------------------------------------------------------------------


def test_the_cli_names_a_late_bad_line_and_imports_nothing(cli: Cli, tmp_path: Path) -> None:
    path = write_file(tmp_path / "memory.jsonl", GOOD_LINES, document_line(GOOD_LINES, metadata={"": "x"}))
    run = cli("--import-memory", str(path))
    assert run.returncode == 1, run.stderr
    assert run.stderr == f'ocat: {path}:{GOOD_LINES + 1}: metadata key "" is empty; nothing was imported\n'
    # The file is checked before the model is looked for (here it would be downloaded, and fail).
    assert cli("--import-memory", str(path), env={"OCAT_EMBEDDING_MODEL_PATH": None}).stderr == run.stderr
    surrogate = write_file(tmp_path / "s.jsonl", GOOD_LINES, document_line(GOOD_LINES, text="bad \udfff"))
    run = cli("--import-memory", str(surrogate), "--output", "json")
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert run.json()["error"]["message"].startswith(f"{surrogate}:{GOOD_LINES + 1}: text holds a lone surrogate")
    counts = stats(cli)
    assert (counts["exchanges"], counts["documents"]) == (0, 0)


CORRUPT = r"""
import sys
from pathlib import Path
from ocat.memory.storage.chroma import collection_names, open_client
from ocat.memory.storage.location import StoreLocation
collection = open_client(StoreLocation(path=Path(sys.argv[1]))).get_collection(collection_names("default")[0])
# What another client could have written: prior ids that are not JSON.
collection.update(ids=[sys.argv[2]], metadatas=[{"prior_exchange_ids": "[not json"}])
"""


def test_an_export_that_fails_leaves_no_partial_file(cli: Cli, tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(exchange_line(1)) + "\n")
    assert cli("--import-memory", str(source)).returncode == 0
    subprocess.run(python_command("-c", CORRUPT, str(cli.store_path), "ex-1"), check=True, capture_output=True)
    folder = tmp_path / "out"
    folder.mkdir()
    run = cli("--export-memory", str(folder / "memory.jsonl"))
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr and run.stderr.startswith("ocat: ")
    assert list(folder.iterdir()) == []  # neither the file nor memory.jsonl.partial


def test_concurrent_imports_through_an_open_window_report_what_each_added(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in exchange_records(400)))
    window = start_window(cli)  # the chat serves the store, so the three write at the same time
    try:
        imports = [
            subprocess.Popen(
                python_command("-m", "ocat", "--import-memory", str(path), "--output", "json", env=cli.environ()),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli.environ(), cwd=cli.home,
            )
            for _ in range(3)
        ]
        outputs = [p.communicate(timeout=600) for p in imports]
        assert [p.returncode for p in imports] == [0, 0, 0], [err for _, err in outputs]
        results = [json.loads(out)["result"] for out, _ in outputs]
        assert sum(r["added"] for r in results) == 400, results
        assert all(r["records"] == 400 for r in results)
    finally:
        assert window.stdin is not None
        window.stdin.write("quit\n")
        window.stdin.flush()
        window.wait(timeout=60)
    assert stats(cli)["exchanges"] == 400
