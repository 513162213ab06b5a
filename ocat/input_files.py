"""Files a user names for an import: regular files only, and a pipe's content saved to one first.

A pipe (`<(cat export.json)`, `/dev/stdin`) blocks on open or is used up by the first look at
it (telling its format), and a device (`/dev/zero`) never ends; so an import reads regular
files, and `-` saves standard input to a temporary file that it then reads like any other.
"""

from __future__ import annotations

import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from ocat.errors import InputFileError

# What `-` means for an import's path.
STDIN = "-"


def refuse_special(path: Path) -> None:
    """InputFileError for a path that is neither a regular file nor a folder. Told by `stat`,
    which never blocks (opening a pipe does). A missing path is left to the open, which names it."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise InputFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return
    what = "a pipe" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "no file"
    raise InputFileError(
        f"{path} is {what}, not a regular file; to import what a pipe holds, give `-` and pipe it in "
        "(`ocat --import-history - < export.json`): it is saved to a temporary file first"
    )


@contextmanager
def spooled_stdin(stream: BinaryIO | None = None, suffix: str = "") -> Iterator[Path]:
    """Standard input saved to a temporary file (deleted afterwards), for an import of `-`."""
    source = stream if stream is not None else sys.stdin.buffer
    with tempfile.TemporaryDirectory(prefix="ocat-stdin-") as folder:
        target = Path(folder) / f"stdin{suffix}"
        try:
            with target.open("wb") as out:
                shutil.copyfileobj(source, out, 1 << 20)
        except OSError as exc:
            raise InputFileError(f"cannot save standard input to {target}: {exc.strerror or exc}") from exc
        if target.stat().st_size == 0:
            raise InputFileError("standard input is empty: pipe an export into `-`")
        yield target
