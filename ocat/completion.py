"""What completes a slash command's argument as it is typed: model names for /model, paths
(and `docs:NAME`) for /vdoc. Pure lookups, no Textual, for the full-screen chat and the line mode."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ocat.commands import REGISTRY, commands
from ocat.commands.memory import DOCS_PREFIX

# A list longer than this is no help while typing: type more letters.
MAX_CANDIDATES = 50


@dataclass(frozen=True)
class Candidate:
    """One completion: the whole input it makes, and what the list shows for it."""

    text: str
    label: str


@dataclass(frozen=True)
class Completions:
    """The candidates for an argument being typed; `whole` when what is typed is already a
    complete value (an existing path, a listed model), so Enter sends it rather than completing."""

    command: str
    candidates: tuple[Candidate, ...]
    whole: bool = False


def argument_being_typed(text: str) -> tuple[str, str] | None:
    """The command (by its name, aliases resolved) and the argument typed after it, when the
    input is `/name ` and more on one line; else None."""
    if not text.startswith("/") or text.startswith("//") or "\n" in text:
        return None
    name, space, rest = text[1:].partition(" ")
    entry = REGISTRY.get(name.lower())
    if not space or entry is None:
        return None
    return entry.name, rest.lstrip(" ")


def complete(text: str, *, models: Sequence[str] | None = None, docs_folder: str | None = None) -> Completions | None:
    """The completions of the argument at the end of `text` (/model NAME, /vdoc PATH), or None
    when `text` is not such an argument. `models` is the provider's list, when known."""
    typed = argument_being_typed(text)
    if typed is None:
        return None
    name, argument = typed
    head = text[: len(text) - len(argument)]
    if name == "model":
        return _model_completions(head, argument, models or ())
    if name == "vdoc":
        return _path_completions(head, argument, docs_folder)
    return None


def command_names(text: str) -> list[Candidate]:
    """The commands whose name (or an alias) starts with the typed `/word` (for the line mode)."""
    if not text.startswith("/") or text.startswith("//") or any(ch.isspace() for ch in text):
        return []
    typed = text[1:].lower()
    return [Candidate(f"/{c.name}", f"/{c.name}") for c in commands()
            if any(n.startswith(typed) for n in (c.name, *c.aliases))]


def _model_completions(head: str, typed: str, models: Sequence[str]) -> Completions:
    """Names starting with what is typed (with or without the provider's `prefix/`), then names containing it."""
    wanted = typed.strip().lower()

    def starts(name: str) -> bool:
        lowered = name.lower()
        return lowered.startswith(wanted) or lowered.split("/", 1)[-1].startswith(wanted)

    first = [m for m in models if starts(m)]
    then = [m for m in models if wanted and wanted in m.lower() and not starts(m)]
    picked = (first + then)[:MAX_CANDIDATES]
    whole = typed.strip() in models
    return Completions("model", tuple(Candidate(head + m, m) for m in picked), whole=whole)


def _path_completions(head: str, typed: str, docs_folder: str | None) -> Completions:
    if typed.startswith(DOCS_PREFIX):
        return _docs_completions(head, typed, docs_folder)
    folder_part, _, prefix = typed.rpartition("/")
    folder_typed = typed[: len(folder_part) + 1] if "/" in typed else ""
    folder = Path(os.path.expanduser(folder_typed or "."))
    candidates = [Candidate(head + folder_typed + entry, entry) for entry in _entries(folder, prefix)]
    if docs_folder and not folder_typed and DOCS_PREFIX.startswith(typed) and typed:
        # "d", "do"...: the docs folder's names are offered too.
        candidates += _docs_completions(head, DOCS_PREFIX, docs_folder).candidates
    whole = bool(typed) and os.path.exists(os.path.expanduser(typed))
    return Completions("vdoc", tuple(candidates[:MAX_CANDIDATES]), whole=whole)


def _docs_completions(head: str, typed: str, docs_folder: str | None) -> Completions:
    """`docs:NAME` entries inside the docs folder (never `..` out of it)."""
    if not docs_folder:
        return Completions("vdoc", ())
    name = typed[len(DOCS_PREFIX):]
    folder_part, _, prefix = name.rpartition("/")
    if ".." in Path(folder_part).parts or name.startswith("/"):
        return Completions("vdoc", ())
    folder_typed = name[: len(folder_part) + 1] if "/" in name else ""
    root = Path(os.path.expanduser(docs_folder))
    entries = _entries(root / folder_typed, prefix)
    candidates = tuple(Candidate(f"{head}{DOCS_PREFIX}{folder_typed}{e}", f"{DOCS_PREFIX}{folder_typed}{e}")
                       for e in entries)
    whole = bool(name) and (root / name).exists()
    return Completions("vdoc", candidates, whole=whole)


def _entries(folder: Path, prefix: str) -> list[str]:
    """Names in `folder` starting with `prefix` (folders end with "/"; hidden ones only when
    `prefix` starts with "."), folders first, then by name; at most MAX_CANDIDATES."""
    found: list[tuple[bool, str]] = []
    try:
        with os.scandir(folder) as listing:
            for entry in listing:
                if not entry.name.startswith(prefix) or (entry.name.startswith(".") and not prefix.startswith(".")):
                    continue
                try:
                    is_folder = entry.is_dir()
                except OSError:
                    is_folder = False
                found.append((not is_folder, entry.name + ("/" if is_folder else "")))
                if len(found) >= MAX_CANDIDATES * 20:
                    break  # a huge folder: enough to choose from, and typing more narrows it
    except OSError:
        return []  # not a folder, gone, or not readable: nothing to offer
    return [name for _, name in sorted(found, key=lambda f: (f[0], f[1].lower()))][:MAX_CANDIDATES]
