"""The local model's lean graph (ocat.memory.embedding.lean_graph): the same vectors, bit for
bit, from a session that keeps the word-embedding table int8; kept once in the cache folder,
with a record of its digests, and made again when damaged (ocat.memory.embedding.lean_cache);
and the session for a handful of texts (a one-shot --ask) close to the other."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from ocat.memory.embedding import lean_cache
from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder
from ocat.memory.embedding.lean_cache import check_cache, lean_cache_dir, session_source
from ocat.memory.embedding.lean_graph import lean_graph
from tests.support import MODEL_DIR

TEXTS = ["hello", "what did I say about the ladder in the shed last week?", "Привет, как дела? 東京は日本の首都です。",
         "a long answer " * 200]


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _session_of(model: str | bytes, monkeypatch: pytest.MonkeyPatch, *, few_texts: bool = False) -> OnnxMiniLMEmbedder:
    """An embedder whose session is made from `model` (a file's path, or the graph's bytes)."""
    embedder = OnnxMiniLMEmbedder(MODEL_DIR)
    with monkeypatch.context() as patched:
        patched.setattr("ocat.memory.embedding.embedders.session_source", lambda _path, **_: model)
        embedder.load(few_texts=few_texts)
    return embedder


@pytest.mark.slow
def test_the_lean_graph_gives_the_same_vectors_bit_for_bit(cache_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    original = _session_of(str(MODEL_DIR / "model.onnx"), monkeypatch)
    lean = _session_of(session_source(MODEL_DIR / "model.onnx"), monkeypatch)
    assert lean.embed(TEXTS) == original.embed(TEXTS)


@pytest.mark.slow
def test_the_session_for_a_few_texts_is_close_to_the_other(cache_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    lean = session_source(MODEL_DIR / "model.onnx")
    few = np.array(_session_of(lean, monkeypatch, few_texts=True).embed(TEXTS))
    usual = np.array(OnnxMiniLMEmbedder(MODEL_DIR).embed(TEXTS))
    assert np.abs(few - usual).max() < 1e-4
    assert (few * usual).sum(axis=1).min() > 0.99999


def test_the_lean_graph_changes_only_the_word_embeddings() -> None:
    source = (MODEL_DIR / "model.onnx").read_bytes()
    lean = lean_graph(source)
    assert lean is not None and lean != source
    assert lean_graph(lean) is None  # nothing left to change: the table is gathered before it is scaled
    assert abs(len(lean) - len(source)) < 1000  # the weights are the same bytes; only a few nodes changed


def test_it_is_made_once_and_remade_for_another_copy_of_the_model(cache_home: Path, tmp_path: Path) -> None:
    model = tmp_path / "model" / "model.onnx"
    model.parent.mkdir()
    model.write_bytes((MODEL_DIR / "model.onnx").read_bytes())
    first = session_source(model)
    assert isinstance(first, str) and Path(first).parent == lean_cache_dir()
    made = Path(first).stat().st_mtime_ns
    assert session_source(model) == first and Path(first).stat().st_mtime_ns == made  # read, not made again
    os.utime(model, ns=(made + 10**9, made + 10**9))  # the model was replaced by another copy
    second = session_source(model)
    assert second != first and Path(second).is_file() and not Path(first).exists()  # the old one is gone


def test_an_unwritable_cache_gives_the_graph_as_bytes(cache_home: Path) -> None:
    cache_home.parent.mkdir(parents=True, exist_ok=True)
    cache_home.write_text("a file where the cache folder should be")
    lean = session_source(MODEL_DIR / "model.onnx")
    assert isinstance(lean, bytes) and lean == lean_graph((MODEL_DIR / "model.onnx").read_bytes())


def test_a_model_it_cannot_read_is_given_to_onnxruntime_as_it_is(cache_home: Path, tmp_path: Path) -> None:
    odd = tmp_path / "model.onnx"
    odd.write_bytes(b"\x00not a protobuf at all\xff" * 10)
    assert session_source(odd) == str(odd)
    assert session_source(tmp_path / "missing.onnx") == str(tmp_path / "missing.onnx")
    assert not lean_cache_dir().exists()


def _graph(scale_dims: list[int], axis: int = 0) -> bytes:
    """A three-node graph: Gather(Mul(Cast(table [5, 4]), scale), ids), with the gather's axis."""
    from ocat.memory.embedding.lean_graph import _model_class

    model = _model_class()()
    graph = model.graph
    for name, dims in (("table", [5, 4]), ("scale", scale_dims)):
        tensor = graph.initializer.add()
        tensor.name, tensor.dims[:] = name, dims
    for op_type, inputs, output in (("Cast", ["table"], "table_f"), ("Mul", ["table_f", "scale"], "table_s"),
                                    ("Gather", ["table_s", "ids"], "rows")):
        node = graph.node.add()
        node.op_type, node.input[:], node.output[:], node.name = op_type, inputs, [output], op_type
    gather = graph.node[2].attribute.add()
    gather.name, gather.i = "axis", axis
    return bytes(model.SerializeToString())


def test_only_row_scales_gathered_along_the_rows_are_changed() -> None:
    assert lean_graph(_graph([5, 1])) is not None
    assert lean_graph(_graph([1, 4])) is None  # a scale per column is not gathered with the rows
    assert lean_graph(_graph([])) is None  # one scale for the whole table
    assert lean_graph(_graph([5, 1], axis=1)) is None  # gathering columns


@pytest.mark.slow
def test_embedding_threads_reaches_the_session_and_the_vectors_stay_the_same() -> None:
    import numpy as np

    from ocat.config.loading import load_settings
    from ocat.memory.embedding.embedders import embedder_for

    settings = load_settings(env={"OCAT_EMBEDDING_MODEL_PATH": str(MODEL_DIR), "OCAT_EMBEDDING_THREADS": "1"})
    one = embedder_for(settings.embedding)
    assert isinstance(one, OnnxMiniLMEmbedder)
    vectors = np.array(one.embed(TEXTS))
    assert one._session.get_session_options().intra_op_num_threads == 1
    every_core = OnnxMiniLMEmbedder(MODEL_DIR)
    assert np.abs(vectors - np.array(every_core.embed(TEXTS))).max() < 1e-5
    assert every_core._session.get_session_options().intra_op_num_threads == 0  # onnxruntime's choice


# -- a damaged cache is made again from the model, with one line ------------------------------------


def _cached(model: Path) -> Path:
    """The cached graph `session_source` made for `model`."""
    made = session_source(model)
    assert isinstance(made, str) and Path(made).parent == lean_cache_dir()
    return Path(made)


def _replace(path: Path, data: bytes, *, keep_time: bool = False) -> None:
    """Put `data` in place of `path` (a new file: the tests' caches are hard links), keeping its
    times when asked (an alteration its size and time do not show)."""
    before = path.stat()
    path.unlink()
    path.write_bytes(data)
    if keep_time:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def _altered(graph: bytes) -> bytes:
    """The graph with bytes of its weights changed: the same size, still a graph onnxruntime loads."""
    middle = len(graph) // 2
    return graph[:middle] + bytes(b ^ 0x5A for b in graph[middle : middle + 4096]) + graph[middle + 4096 :]


DAMAGES = {
    "truncated": lambda graph: graph[: len(graph) // 3],
    "empty": lambda graph: b"",
    "altered": _altered,
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_cache_is_made_again_with_one_line(cache_home: Path, damage: str) -> None:
    model = MODEL_DIR / "model.onnx"
    cached = _cached(model)
    good = cached.read_bytes()
    _replace(cached, DAMAGES[damage](good), keep_time=True)
    lines: list[str] = []
    lean_cache._sound.clear()  # as a new process finds it
    assert session_source(model, notify=lines.append) == str(cached)
    assert cached.read_bytes() == good == lean_graph(model.read_bytes())
    assert len(lines) == 1 and "was damaged" in lines[0] and str(cached.name) in lines[0]
    assert session_source(model, notify=lines.append) == str(cached) and len(lines) == 1  # sound now: no word


def test_a_cache_whose_record_is_lost_or_unreadable_is_made_again(cache_home: Path) -> None:
    model = MODEL_DIR / "model.onnx"
    cached = _cached(model)
    record = cached.with_name(cached.name + ".json")
    for damage in (lambda: record.unlink(), lambda: _replace(record, b"{not json"),
                   lambda: _replace(record, json.dumps({"graph": {"size": "many"}}).encode())):
        damage()
        lines: list[str] = []
        lean_cache._sound.clear()
        assert session_source(model, notify=lines.append) == str(cached)
        assert len(lines) == 1 and "its record" in lines[0]
        assert json.loads(record.read_text())["graph"]["sha256"] == hashlib.sha256(cached.read_bytes()).hexdigest()


def test_the_record_holds_the_digests_of_the_model_and_of_the_graph(cache_home: Path) -> None:
    model = MODEL_DIR / "model.onnx"
    cached = _cached(model)
    record = json.loads(cached.with_name(cached.name + ".json").read_text())
    assert record["model"]["sha256"] == hashlib.sha256(model.read_bytes()).hexdigest()
    assert record["model"]["size"] == model.stat().st_size
    assert record["graph"] == {"size": cached.stat().st_size, "sha256": hashlib.sha256(cached.read_bytes()).hexdigest()}


def test_a_thorough_check_sees_a_graph_no_longer_made_from_this_model(cache_home: Path) -> None:
    """`--check-store` and `--fetch-model` check the model's digest too: a record whose graph is
    sound but whose model digest is another's is made again."""
    model = MODEL_DIR / "model.onnx"
    cached = _cached(model)
    record = cached.with_name(cached.name + ".json")
    written = json.loads(record.read_text())
    written["model"]["sha256"] = "0" * 64
    _replace(record, json.dumps(written).encode())
    assert check_cache(model).problem is None  # the graph matches: a start does not hash the model
    found = check_cache(model, thorough=True)
    assert found.made and found.problem == "the model it was made from has changed since"
    assert "DAMAGED" in found.line() and json.loads(record.read_text())["model"]["sha256"] != "0" * 64


def test_the_cache_is_flushed_to_disk_before_it_is_renamed_into_place(cache_home: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    fsync, replace = os.fsync, os.replace

    def synced(fd: int) -> None:
        events.append("fsync dir" if os.path.isdir(f"/proc/self/fd/{fd}") else "fsync file")
        fsync(fd)

    def renamed(source: Any, target: Any) -> None:
        events.append(f"rename {Path(target).suffix}")
        replace(source, target)

    monkeypatch.setattr(lean_cache.os, "fsync", synced)
    monkeypatch.setattr(lean_cache.os, "replace", renamed)
    _cached(MODEL_DIR / "model.onnx")
    assert events == ["fsync file", "rename .onnx", "fsync dir", "fsync file", "rename .json", "fsync dir"]


@pytest.mark.slow
@pytest.mark.parametrize("damage", [*DAMAGES, "record altered with it"])
def test_a_damaged_cache_gives_the_true_vectors(cache_home: Path, damage: str) -> None:
    import numpy as np
    import onnxruntime

    model = MODEL_DIR / "model.onnx"
    true = np.array(OnnxMiniLMEmbedder(MODEL_DIR).embed(TEXTS))
    cached = _cached(model)
    good = cached.read_bytes()
    if damage == "record altered with it":
        # A graph that does not load, with a record that vouches for it: only loading it tells.
        bad = good[: len(good) // 3]
        record = cached.with_name(cached.name + ".json")
        written = json.loads(record.read_text())
        written["graph"] = {"size": len(bad), "sha256": hashlib.sha256(bad).hexdigest()}
        _replace(record, json.dumps(written).encode())
    else:
        bad = DAMAGES[damage](good)
    _replace(cached, bad, keep_time=True)
    if damage == "altered":  # the attack: a graph that loads and gives other vectors
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        onnxruntime.InferenceSession(str(cached), sess_options=options, providers=["CPUExecutionProvider"])
    lean_cache._sound.clear()
    lines: list[str] = []
    embedder = OnnxMiniLMEmbedder(MODEL_DIR)
    embedder.load(notify=lines.append)
    assert np.abs(np.array(embedder.embed(TEXTS)) - true).max() < 1e-6
    assert len(lines) == 1 and "was damaged" in lines[0]
    assert cached.read_bytes() == good
