"""Vectors kept by model and text (ocat.memory.embedding.vector_cache): a kept vector is the one the
model gives, bit for bit; another model, or another session of the same model, never reads it; a
file cut short or altered is embedded again, never trusted; nothing is kept unless asked."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from ocat.memory.embedding.embedders import Embedder, OnnxMiniLMEmbedder
from tests.support import MODEL_DIR
from tests.support.run_vectors import vectors_kept_in

TEXTS = ["where did I put the spare key", "the boiler needs a reset twice after a power cut " * 30,
         "the boiler needs a reset twice after a power cut " * 30, "été, naïve café ☕"]


@pytest.fixture
def kept(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "vectors"
    with vectors_kept_in(folder):
        yield folder


def counted(embedder: OnnxMiniLMEmbedder) -> list[str]:
    """The texts the model itself runs on from now on (what is not read back)."""
    ran: list[str] = []
    model = embedder._embedded

    def running(texts: Sequence[str]) -> list[list[float]]:
        ran.extend(texts)
        return model(texts)

    embedder._embedded = running  # type: ignore[method-assign]
    return ran


def files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.vec"))


def test_a_kept_vector_is_the_one_the_model_gives_bit_for_bit(real_embedder: Embedder, kept: Path) -> None:
    first = OnnxMiniLMEmbedder(MODEL_DIR)
    made = counted(first)
    cold = first.embed(TEXTS)
    assert made == TEXTS[:2] + TEXTS[3:]  # each distinct text once
    assert len(files(kept)) == 3
    again = OnnxMiniLMEmbedder(MODEL_DIR)  # a new process's embedder, as a bench's would be
    ran = counted(again)
    warm = again.embed(list(reversed(TEXTS)))
    assert ran == []  # all read back
    with vectors_kept_in(None):
        plain = OnnxMiniLMEmbedder(MODEL_DIR).embed(TEXTS)
    assert cold == plain and list(reversed(warm)) == plain  # == on floats: every bit


def test_nothing_is_kept_unless_a_run_asks(real_embedder: Embedder, tmp_path: Path) -> None:
    embedder = OnnxMiniLMEmbedder(MODEL_DIR)
    embedder.embed(TEXTS)
    assert embedder._kept() is None
    assert not list(tmp_path.rglob("*.vec"))


def test_another_model_or_session_never_reads_these_vectors(real_embedder: Embedder, kept: Path, tmp_path: Path) -> None:
    OnnxMiniLMEmbedder(MODEL_DIR).embed(TEXTS)
    # The same name, another model: the tokenizer's file written again (another identity, by content).
    other_dir = tmp_path / "all-MiniLM-L6-v2-int8"
    shutil.copytree(MODEL_DIR, other_dir)
    tokenizer = other_dir / "tokenizer.json"
    tokenizer.chmod(0o644)
    tokenizer.write_text(json.dumps(json.loads(tokenizer.read_text(encoding="utf-8")), indent=1), encoding="utf-8")
    other = OnnxMiniLMEmbedder(other_dir)
    ran = counted(other)
    other.embed(TEXTS)
    assert ran == TEXTS[:2] + TEXTS[3:]
    # The session a one-shot `--ask` loads gives vectors up to ~2e-7 away: its own, never these.
    few = OnnxMiniLMEmbedder(MODEL_DIR)
    few.load(few_texts=True)
    ran = counted(few)
    from_few = few.embed(TEXTS)
    assert ran == TEXTS[:2] + TEXTS[3:]
    with vectors_kept_in(None):
        alone = OnnxMiniLMEmbedder(MODEL_DIR)
        alone.load(few_texts=True)
        assert from_few == alone.embed(TEXTS)
    folders = {path.parent.parent for path in files(kept)}
    assert len(folders) == 3
    # A file copied from one model's folder into another's fails its check there.
    full = OnnxMiniLMEmbedder(MODEL_DIR)
    full.embed(TEXTS[:1])
    ours, theirs = full._kept(), other._kept()
    assert ours is not None and theirs is not None
    name = files(ours.folder)[0].stem
    target = theirs.folder / name[:2] / f"{name}.vec"
    shutil.copyfile(ours.folder / name[:2] / f"{name}.vec", target)
    assert theirs.read(name) is None


@pytest.mark.parametrize("damage", ["cut short", "emptied", "a bit flipped", "another header"])
def test_a_damaged_file_is_embedded_again_never_trusted(real_embedder: Embedder, kept: Path, damage: str) -> None:
    first = OnnxMiniLMEmbedder(MODEL_DIR)
    want = first.embed(TEXTS[:1])
    (path,) = files(kept)
    data = bytearray(path.read_bytes())
    if damage == "cut short":
        data = data[: len(data) - 100]
    elif damage == "emptied":
        data = bytearray()
    elif damage == "a bit flipped":
        data[-7] ^= 0x01  # one component's low bit: a vector that looks sound
    else:
        data[:5] = b"xxxxx"
    path.write_bytes(bytes(data))
    again = OnnxMiniLMEmbedder(MODEL_DIR)
    ran = counted(again)
    assert again.embed(TEXTS[:1]) == want
    assert ran == TEXTS[:1]
    third = OnnxMiniLMEmbedder(MODEL_DIR)
    ran = counted(third)
    assert third.embed(TEXTS[:1]) == want and ran == []  # written again, whole
