"""Finding the data in what the user gave: a zip, a folder, a JSON file or an SQLite file.

ChatGPT and Claude exports are zips holding `conversations.json` at the top (newer ChatGPT
exports split it into `conversations-000.json`, `conversations-001.json` ...); people also
unzip them and pass the folder or the file. simonw/llm keeps `logs.db`, an SQLite file.
"""

from __future__ import annotations

import re
import zipfile
import zlib
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ocat.errors import InputFileError
from ocat.input_files import refuse_special
import ocat.history_import.json_stream as json_stream

SQLITE_MAGIC = b"SQLite format 3\x00"
ZIP_MAGIC = b"PK\x03\x04"
CONVERSATIONS = "conversations.json"
LLM_DATABASE = "logs.db"
_SHARD = re.compile(r"conversations-(\d+)\.json")


@dataclass(frozen=True)
class JsonPart:
    """One JSON file of an export: a file on disk, or a member of a zip."""

    file: Path
    """The file on disk, or the zip."""
    member: str | None = None
    """The member's name inside the zip; None for a plain file."""

    @property
    def name(self) -> str:
        """How errors name it."""
        return str(self.file) if self.member is None else f"{self.member} in {self.file}"


@dataclass(frozen=True)
class Located:
    """Where an export's data is: JSON parts read in order, or an SQLite database."""

    path: Path
    parts: tuple[JsonPart, ...] = ()
    database: Path | None = None


def locate(path: Path) -> Located:
    """Find the conversations in `path` (a zip, a folder, a JSON or SQLite file) from what it
    holds, not its name; InputFileError when it is missing or holds none."""
    if path.is_dir():
        return _in_folder(path)
    refuse_special(path)
    try:
        with path.open("rb") as handle:
            head = handle.read(len(SQLITE_MAGIC))
    except FileNotFoundError:
        raise InputFileError(f"no such file or folder: {path}") from None
    except OSError as exc:
        raise InputFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    if head.startswith(SQLITE_MAGIC):
        return Located(path, database=path)
    if head.startswith(ZIP_MAGIC):
        return Located(path, parts=_in_zip(path))
    return Located(path, parts=(JsonPart(path),))


def _in_folder(folder: Path) -> Located:
    if (folder / CONVERSATIONS).is_file():
        return Located(folder, parts=(JsonPart(folder / CONVERSATIONS),))
    shards = shard_files({p.name: p for p in folder.iterdir() if p.is_file()})
    if shards:
        return Located(folder, parts=tuple(JsonPart(p) for p in shards))
    if (folder / LLM_DATABASE).is_file():
        return Located(folder, database=folder / LLM_DATABASE)
    raise InputFileError(
        f"{folder} is not a ChatGPT, Claude or llm export: it holds no {CONVERSATIONS}, "
        f"conversations-000.json or {LLM_DATABASE}"
    )


def _in_zip(path: Path) -> tuple[JsonPart, ...]:
    try:
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if not n.startswith("__MACOSX/") and not n.endswith("/")]
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise InputFileError(f"{path} is a damaged or truncated zip file ({exc}); download the export again") from None
    # Re-zipped exports put everything in one folder: take the shallowest folder that has them.
    by_folder: dict[PurePosixPath, dict[str, str]] = {}
    for name in names:
        member = PurePosixPath(name)
        if member.name == CONVERSATIONS or _SHARD.fullmatch(member.name):
            by_folder.setdefault(member.parent, {})[member.name] = name
    if not by_folder:
        raise InputFileError(
            f"{path} is not a ChatGPT or Claude export: the zip holds no {CONVERSATIONS} or conversations-000.json"
        )
    found = by_folder[min(by_folder, key=lambda folder: len(folder.parts))]
    members = [found[CONVERSATIONS]] if CONVERSATIONS in found else shard_files(found)
    return tuple(JsonPart(path, member) for member in members)


def shard_files(files: dict[str, Any]) -> list[Any]:
    """The values of `files` named conversations-NNN.json, in the order of their numbers."""
    numbered = [(int(m.group(1)), name) for name in files if (m := _SHARD.fullmatch(name))]
    return [files[name] for _, name in sorted(numbered)]


class _GuardedReader:
    """A zip member's stream whose read errors (a truncated or corrupt zip) are InputFileErrors."""

    def __init__(self, stream: Any, name: str) -> None:
        self.stream = stream
        self.name = name

    def read(self, size: int = -1, /) -> bytes:
        """Up to `size` bytes, or an InputFileError saying the zip is damaged."""
        try:
            data: bytes = self.stream.read(size)
        except (zipfile.BadZipFile, EOFError, zlib.error, OSError) as exc:
            raise InputFileError(
                f"{self.name} cannot be read: the zip is damaged or truncated ({exc}); download the export again"
            ) from None
        return data


@contextmanager
def _opened(part: JsonPart) -> Iterator[json_stream.Readable]:
    if part.member is None:
        try:
            with part.file.open("rb") as handle:
                yield handle
        except FileNotFoundError:
            raise InputFileError(f"no such file: {part.file}") from None
        except OSError as exc:
            raise InputFileError(f"cannot read {part.file}: {exc.strerror or exc}") from None
        return
    try:
        archive = zipfile.ZipFile(part.file)
        stream = archive.open(part.member)
    except (zipfile.BadZipFile, OSError, EOFError, KeyError, RuntimeError) as exc:
        raise InputFileError(f"{part.name} cannot be opened: {exc}") from None
    with archive, stream:
        yield _GuardedReader(stream, part.name)


def iter_items(located: Located, noun: str = "conversation") -> Generator[Any, None, None]:
    """Every item of the export's JSON parts, in order, streamed (json_stream.iter_array)."""
    for part in located.parts:
        with _opened(part) as stream:
            yield from json_stream.iter_array(stream, part.name, noun)


def first_item(located: Located) -> Any | None:
    """The first readable item of the export's JSON (one nested too deeply is passed over), or
    None when it holds none."""
    items = iter_items(located)
    try:
        return next((item for item in items if not isinstance(item, json_stream.TooDeep)), None)
    finally:
        items.close()  # closes the file (or zip) now, not when the generator is collected


def count_key(located: Located, key: bytes, *, chunk: int = 1 << 20) -> int:
    """How many times `key` (a JSON key with its quotes and colon, e.g. b'"current_node":')
    occurs in the export's JSON: a key each conversation has once counts the conversations
    in one fast pass over the bytes. Inside a JSON string a quote is escaped, so the text of a
    message never matches."""
    found = 0
    for part in located.parts:
        with _opened(part) as stream:
            tail = b""
            while True:
                block = stream.read(chunk)
                if not block:
                    break
                data = tail + (block if isinstance(block, bytes) else block.encode("utf-8"))
                found += data.count(key)
                # Keep the last len(key) - 1 bytes: a key split between two blocks is counted once.
                keep = len(key) - 1
                tail = data[-keep:] if keep else b""
                found -= tail.count(key)  # counted again with the next block (or just below)
            found += tail.count(key)
    return found
