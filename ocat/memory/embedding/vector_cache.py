"""Vectors kept on disk by model and text, for runs that embed the same texts again and again:
the test suite's dev-set tests and the benches' runs (docs/development.md, "Vectors kept for a
run"). Off unless a folder is given (`use_folder`); ocat itself never gives one.

Each vector is a file named by its text's SHA-256, in a folder named by the model's identity:
the SHA-256 of the model's graph and tokenizer files (not their names), the session kind and
thread count, the onnxruntime and tokenizers versions, and this package's own embedding code.
A file holds a header, a SHA-256 over the identity, the text's digest and the vector, and the
vector's float32 bytes: one cut short, altered or copied from another model's folder fails that
check and is embedded again, never trusted. Files are written under a temporary name and renamed
into place, so processes that share the folder never read a part of one (two writing the same
text write the same bytes). The local model's vectors do not depend on the batch a text is in
(tests/model/test_retrieval_real_model.py), so a kept vector is the one the model gives, bit for bit.
"""

from __future__ import annotations

import hashlib
from array import array
from pathlib import Path
from typing import Callable, Sequence

from ocat.memory.embedding.lean_cache import file_sha256, write_atomically

_HEADER = b"ocat-vector-1\n"
_DIGEST = 32  # bytes of a SHA-256
# The embedding code whose output a kept vector is (a change to it is another model here).
_CODE = ("embedders.py", "lean_graph.py", "lean_cache.py", "vector_cache.py")

_folder: Path | None = None
# Identities made in this process, by the files' (path, device, inode, size, time) and the rest.
_identities: dict[tuple[object, ...], str] = {}


def use_folder(folder: Path | None) -> Path | None:
    """Keep vectors in `folder` from now on in this process (None: keep none, the default);
    returns the folder used until now."""
    global _folder
    before, _folder = _folder, folder
    return before


def kept_in(model_dir: Path, *, few_texts: bool, threads: int | None, dimensions: int) -> VectorCache | None:
    """The kept vectors of the local model in `model_dir` as this process runs it, or None when
    none are kept (no folder given, or the model's files cannot be read)."""
    if _folder is None:
        return None
    try:
        identity = model_identity(model_dir, few_texts=few_texts, threads=threads)
    except OSError:
        return None
    return VectorCache(_folder / identity[:32], identity, dimensions)


def model_identity(model_dir: Path, *, few_texts: bool, threads: int | None) -> str:
    """A SHA-256 (hex) of what makes the model's vectors what they are (see the module's docstring)."""
    import onnxruntime
    import tokenizers

    files = [model_dir / "model.onnx", model_dir / "tokenizer.json", *(Path(__file__).parent / n for n in _CODE)]
    seen = tuple((str(f), *_stamp(f)) for f in files)
    key = (seen, few_texts, threads or 0, onnxruntime.__version__, tokenizers.__version__)
    if key not in _identities:
        digest = hashlib.sha256(repr(key[1:]).encode())
        for file in files:
            digest.update(file_sha256(file).encode())
        _identities[key] = digest.hexdigest()
    return _identities[key]


class VectorCache:
    """The vectors of one model identity in one folder."""

    def __init__(self, folder: Path, identity: str, dimensions: int) -> None:
        self.folder = folder
        self._identity = identity.encode()
        self._size = dimensions * 4

    def through(self, texts: Sequence[str], embed: Callable[[Sequence[str]], list[list[float]]]) -> list[list[float]]:
        """The vectors of `texts`, in order: those kept read back, the others given by `embed` (each
        distinct text once, in one call) and kept."""
        names = [hashlib.sha256(t.encode("utf-8", "surrogatepass")).hexdigest() for t in texts]
        found: dict[str, list[float]] = {}
        for name in dict.fromkeys(names):
            vector = self.read(name)
            if vector is not None:
                found[name] = vector
        missing = {name: text for name, text in zip(names, texts) if name not in found}
        if missing:
            made = embed(list(missing.values()))
            for name, vector in zip(missing, made):
                found[name] = vector
                self.write(name, vector)
        return [found[name] for name in names]

    def read(self, name: str) -> list[float] | None:
        """The kept vector of the text whose digest is `name`, or None (absent, or failing its check)."""
        try:
            data = self._path(name).read_bytes()
        except OSError:
            return None
        payload = data[len(_HEADER) + _DIGEST :]
        if (len(payload) != self._size or not data.startswith(_HEADER)
                or data[len(_HEADER) : len(_HEADER) + _DIGEST] != self._check(name, payload)):
            return None
        return array("f", payload).tolist()

    def write(self, name: str, vector: Sequence[float]) -> None:
        """Keep a vector, all or nothing; a folder that cannot be written keeps none."""
        payload = array("f", vector).tobytes()
        try:
            write_atomically(self._path(name), _HEADER + self._check(name, payload) + payload, durable=False)
        except OSError:
            pass

    def _path(self, name: str) -> Path:
        return self.folder / name[:2] / f"{name}.vec"

    def _check(self, name: str, payload: bytes) -> bytes:
        return hashlib.sha256(self._identity + name.encode() + payload).digest()


def _stamp(file: Path) -> tuple[int, int, int, int]:
    stat = file.stat()
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns

