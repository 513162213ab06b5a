"""The export and import operations: all memory to JSON Lines and back (`--export-memory`, `--import-memory`)."""

from __future__ import annotations

from pathlib import Path
from typing import IO, TYPE_CHECKING, Callable, TypeVar

from ocat.errors import InputFileError
from ocat import memory
from ocat.input_files import refuse_special

if TYPE_CHECKING:
    from ocat.memory import MemoryStore
    from ocat.memory import TransferResult

T = TypeVar("T")


def export_to_stream(store: MemoryStore, out: IO[str]) -> TransferResult:
    """Write every record to `out`, one JSON object per line."""
    return memory.export_memory(store, out)


def export_to_file(store: MemoryStore, path: Path) -> TransferResult:
    """Write every record to `path`, whole or not at all (`write_whole`)."""
    return write_whole(path, lambda handle: memory.export_memory(store, handle, path=str(path)))


def write_whole(path: Path, fill: Callable[[IO[str]], T]) -> T:
    """Write a file with `fill`: beside it first, then renamed, so a failure (a full disk, a
    store error, Ctrl+C) never leaves half a file under its name, nor a `.partial`."""
    partial = path.with_name(path.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8") as handle:
            outcome = fill(handle)
        partial.replace(path)
    except OSError as exc:
        raise InputFileError(f"cannot write {path}: {exc.strerror or exc}") from exc
    finally:
        partial.unlink(missing_ok=True)
    return outcome


def check_import(path: Path) -> TransferResult:
    """Read and check a whole export file before anything is opened or written (InputFileError
    naming the first bad line, or saying why the file cannot be read)."""
    refuse_special(path)
    return memory.check_import_file(path)


def import_file(
    store: MemoryStore, path: Path, checked: TransferResult, progress: Callable[[int, int], None] | None = None
) -> TransferResult:
    """Add the records of a checked export file (`check_import`'s result); records already
    stored are skipped, so importing twice adds nothing. The file is read a second time here,
    record by record, rather than held in memory whole."""
    return memory.import_memory(store, path, progress=progress, checked=checked)
