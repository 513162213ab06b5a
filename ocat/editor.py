"""The user's own editor ($VISUAL, $EDITOR): compose a prompt in a temporary file, or edit a file (/profile)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Mapping

from ocat.errors import OcatError

# Tried in order when neither $VISUAL nor $EDITOR is set, as git and click do: Debian's
# sensible-editor follows the user's own choice (select-editor); vi is on every Unix.
FALLBACK_EDITORS = ("sensible-editor", "vi", "nano")


def editor_command(environ: Mapping[str, str] | None = None) -> list[str]:
    """The editor to run, as an argument list: $VISUAL, else $EDITOR (split like a shell
    would, so `code --wait` works), else the first of FALLBACK_EDITORS found."""
    env = os.environ if environ is None else environ
    for variable in ("VISUAL", "EDITOR"):
        value = env.get(variable, "").strip()
        if value:
            try:
                words = shlex.split(value)
            except ValueError as exc:
                raise OcatError(f"${variable} cannot be read as a command ({exc}): {value!r}") from None
            if words:
                return words
    for name in FALLBACK_EDITORS:
        if shutil.which(name, path=env.get("PATH")):
            return [name]
    raise OcatError("no editor found: set $EDITOR (for example `export EDITOR=nano`) and try again")


def edit_file(path: Path, *, template: str = "", environ: Mapping[str, str] | None = None) -> Path:
    """Open a file in the user's editor (created with `template`, and its folder, when new);
    returns the path. Raises OcatError as `edit_text` does."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            path.write_text(template, encoding="utf-8")
    except OSError as exc:
        raise OcatError(f"cannot create {path}: {exc.strerror or exc}") from None
    _run(editor_command(environ), str(path), environ, "the file is left as it was")
    return path


def _run(command: list[str], path: str, environ: Mapping[str, str] | None, kept: str) -> None:
    try:
        finished = subprocess.run([*command, path], env=None if environ is None else dict(environ), check=False)
    except OSError as exc:  # not found, not executable
        raise OcatError(f"the editor {command[0]!r} could not be started ({exc.strerror or exc}); "
                        "set $EDITOR to one that is installed") from None
    if finished.returncode != 0:
        raise OcatError(f"the editor {command[0]!r} exited with status {finished.returncode}; {kept}")


def edit_text(text: str, *, environ: Mapping[str, str] | None = None) -> str:
    """Open `text` in the user's editor and return what was saved (its final line breaks dropped).

    Raises OcatError when the editor cannot be found or started, or exits with an error: the
    caller keeps the text it had. The temporary file is removed in every case.
    """
    command = editor_command(environ)
    # .md: editors colour the prompt as Markdown, which is what answers are written in.
    handle, path = tempfile.mkstemp(prefix="ocat-prompt-", suffix=".md")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        _run(command, path, environ, "the prompt is left as it was")
        with open(path, encoding="utf-8", errors="replace") as edited:
            return edited.read().rstrip("\r\n")
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
