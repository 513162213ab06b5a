"""The lean graph's cache file (ocat.memory.embedding.lean_graph): made once, checked when read,
made again from the model when it is damaged.

The graph is written into the cache folder, named by the model file's size and time, beside a
record (`<graph>.json`) of what it was made from and of itself: the model's size, time and
SHA-256, the graph's size and SHA-256. Both are written under temporary names, flushed to disk
(file and folder) and renamed into place, the graph first. Before onnxruntime is given the
graph, its size and SHA-256 are checked against the record (23 MB: ~20 ms, once per process);
one that is absent is made quietly, one that is damaged (cut short, emptied, altered, its record
lost) is made again with one line saying so, and so is one that passes the check but does not
load (`remake`). `check_cache(thorough=True)`, for `ocat --check-store` and `--fetch-model`,
checks the model's own SHA-256 against the record too.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ocat.config.locations import cache_dir, display_path
from ocat.memory.embedding.lean_graph import VERSION, lean_graph

_READ_SIZE = 1 << 20
# One check (and one making) at a time in a process: the chat loads the model in a thread while
# it makes the model ready, and both look at the cache; the second finds it checked.
_lock = threading.Lock()
# The graphs found sound in this process, by (path, device, inode, size, time): checked once.
_sound: set[tuple[str, int, int, int, int]] = set()


@dataclass(frozen=True)
class CacheCheck:
    """What a look at the model's cached graph found, and whether it was made again."""

    # The cached graph (None: the model needs none, or cannot be read here).
    path: Path | None
    # What was wrong with it (None: sound, absent or not needed).
    problem: str | None = None
    # Whether it was made (again) by this look.
    made: bool = False
    # The graph to give onnxruntime: the cached file's path, the graph itself when the cache cannot
    # be written, or the model file's path (no lean graph for it).
    source: str | bytes = ""

    def line(self) -> str:
        """The finding in words, for `--check-store` and `--fetch-model`."""
        if self.path is None:
            return "model graph cache: not used for this model"
        where = display_path(self.path)
        if self.problem is None:
            return f"model graph cache: {where}: {'made' if self.made else 'sound'}"
        return f"model graph cache: {where}: DAMAGED ({self.problem}); made again from the model"

    def to_dict(self) -> dict[str, Any]:
        """The finding as JSON."""
        return {"path": None if self.path is None else str(self.path), "problem": self.problem, "made": self.made}


def lean_cache_dir() -> Path:
    """Where changed graphs are kept."""
    return cache_dir() / "ocat" / "models"


def session_source(model_file: Path, *, notify: Callable[[str], None] | None = None) -> str | bytes:
    """What to give onnxruntime for `model_file`: the changed graph's cached file (checked, made
    again if damaged, which `notify` hears), else its bytes (the cache cannot be written), else the
    model file itself (no such pattern, or unreadable)."""
    return check_cache(model_file, notify=notify).source


def check_cache(model_file: Path, *, notify: Callable[[str], None] | None = None, thorough: bool = False) -> CacheCheck:
    """Check the cached graph of `model_file` against its record, making it (again) when it is
    absent or damaged; `notify` hears one line when it was damaged. `thorough`: the model's own
    SHA-256 is checked against the record too, and the graph's even if this process checked it."""
    try:
        stat = model_file.stat()
    except OSError:
        return CacheCheck(None, source=str(model_file))  # onnxruntime says what is wrong with it
    stem = f"{model_file.parent.name}-{model_file.stem}-lean{VERSION}"
    cached = lean_cache_dir() / f"{stem}-{stat.st_size}-{stat.st_mtime_ns}.onnx"
    with _lock:
        problem = _problem(cached, model_file, thorough=thorough)
        if problem == "":
            return CacheCheck(cached, source=str(cached))
        return _make(model_file, cached, problem or None, notify)


def remake(model_file: Path, why: str, *, notify: Callable[[str], None] | None = None) -> str | bytes:
    """Make the cached graph again, whatever its record says (onnxruntime could not load it: `why`)."""
    found = check_cache(model_file, notify=notify)
    if found.path is None or found.made:
        return found.source
    with _lock:
        _sound.clear()
        return _make(model_file, found.path, why, notify).source


def is_cached_graph(source: str | bytes) -> bool:
    """Whether a session's source is a cached graph (one `remake` can make again)."""
    return isinstance(source, str) and Path(source).parent == lean_cache_dir()


def _problem(cached: Path, model_file: Path, *, thorough: bool) -> str | None:
    """What is wrong with the cached graph: "" when sound, None when absent (nothing wrong)."""
    try:
        stat = cached.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return exc.strerror or str(exc)
    seen = (str(cached), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if seen in _sound and not thorough:
        return ""
    try:
        record = json.loads(_record_path(cached).read_text(encoding="utf-8"))
        size, digest = int(record["graph"]["size"]), str(record["graph"]["sha256"])
        made_from = str(record["model"]["sha256"])
    except FileNotFoundError:
        return "its record of what it was made from is missing"
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"its record of what it was made from cannot be read: {exc}"
    if stat.st_size != size:
        return f"it is {stat.st_size:,} bytes, not the {size:,} it was made with"
    try:
        if file_sha256(cached) != digest:
            return "its SHA-256 is not the one it was made with"
        if thorough and file_sha256(model_file) != made_from:
            return "the model it was made from has changed since"
    except OSError as exc:
        return f"it cannot be read: {exc.strerror or exc}"
    _sound.add(seen)
    return ""


def _make(model_file: Path, cached: Path, problem: str | None, notify: Callable[[str], None] | None) -> CacheCheck:
    """Make the cached graph and its record from the model; `problem` says why an existing one was replaced."""
    try:
        model = model_file.read_bytes()
        lean = lean_graph(model)
    except Exception:  # not a graph protobuf can read here: onnxruntime reads it as it is
        return CacheCheck(None, source=str(model_file))
    if lean is None:
        return CacheCheck(None, source=str(model_file))
    stat = model_file.stat()
    record = {
        "version": VERSION,
        "model": {"path": str(model_file), "size": len(model), "mtime_ns": stat.st_mtime_ns,
                  "sha256": hashlib.sha256(model).hexdigest()},
        "graph": {"size": len(lean), "sha256": hashlib.sha256(lean).hexdigest()},
    }
    try:
        write_atomically(cached, lean)  # the graph first: a record never names a graph not yet there
        write_atomically(_record_path(cached), json.dumps(record, indent=1).encode())
    except OSError:
        return CacheCheck(cached, problem, source=lean)
    if problem is not None and notify is not None:
        notify(f"the model's cached graph {display_path(cached)} was damaged ({problem}); "
               f"made it again from {display_path(model_file)}")
    prefix = f"{model_file.parent.name}-{model_file.stem}-lean"
    for old in cached.parent.glob(f"{prefix}*"):
        if old not in (cached, _record_path(cached)) and old.suffix in (".onnx", ".json"):
            old.unlink(missing_ok=True)  # made from an earlier copy of the model, or by an older ocat
    made = cached.stat()
    _sound.add((str(cached), made.st_dev, made.st_ino, made.st_size, made.st_mtime_ns))
    return CacheCheck(cached, problem, made=True, source=str(cached))


def _record_path(cached: Path) -> Path:
    return cached.with_name(cached.name + ".json")


def file_sha256(path: Path) -> str:
    """The SHA-256 (hex) of a file's bytes, read in blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as read:
        while block := read.read(_READ_SIZE):
            digest.update(block)
    return digest.hexdigest()


def write_atomically(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write `data` under a temporary name and rename it into place, so that a reader sees the old
    file or the new one, never a part; `durable` also flushes the file and its folder to disk, so
    that a crash or a power cut does not either (a cache for one run need not pay for that)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            if durable:
                out.flush()
                os.fsync(out.fileno())
        os.replace(temporary, path)  # two processes making it at once: either copy is the same
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    if not durable:
        return
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)
