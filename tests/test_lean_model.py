"""The local model's lean graph (ocat.memory.embedding.lean_graph): the same vectors, bit for
bit, from a session that keeps the word-embedding table int8; kept once in the cache folder;
and the session for a handful of texts (a one-shot --ask) close to the other."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder
from ocat.memory.embedding.lean_graph import lean_cache_dir, lean_graph, session_source
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
        patched.setattr("ocat.memory.embedding.lean_graph.session_source", lambda _path: model)
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
