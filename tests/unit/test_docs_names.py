"""The docs cannot name what is not there: every `ocat.…` name and `ocat/…` path written in
backticks in docs/*.md (ARCHITECTURE.md among them) and README.md is a module, an attribute of
one, or a file or folder of the repository; and ARCHITECTURE.md's module map names every module."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from tests.support.paths import REPO

DOC_FILES = sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md"]

# `ocat.memory.open_store`, `ocat.memory.partial_documents(store)`: the dotted name at the start.
_NAME = re.compile(r"`(ocat(?:\.\w+)+)")
# `ocat/chat/turn.py`, `ocat/memory/`: a path of the repository, file or folder.
_PATH = re.compile(r"`(ocat/[\w./-]*)`")
# In an installed wheel only (pyproject.toml puts config/ and themes/ there).
_SHIPPED_ONLY = "ocat/_shipped/"


def resolves(dotted: str) -> bool:
    """Whether `ocat.a.b.name` names a module, or an attribute of the longest module prefix."""
    parts = dotted.split(".")
    if "__main__" in parts:  # importing it would run ocat
        return (REPO / Path(*parts)).with_suffix(".py").is_file()
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        try:
            target: object = importlib.import_module(module)
        except ModuleNotFoundError as missing:
            if missing.name is not None and not module.startswith(missing.name):
                raise  # the module exists but a library it imports is missing: not the docs' fault
            continue
        for name in parts[cut:]:
            if not hasattr(target, name):
                return False
            target = getattr(target, name)
        return True
    return False


def cited(text: str) -> set[str]:
    """The `ocat.…` names and `ocat/…` paths a document writes in backticks."""
    return set(_NAME.findall(text)) | set(_PATH.findall(text))


def missing(doc: Path) -> list[str]:
    """What `doc` names (see `cited`) that does not exist, sorted."""
    def exists(name: str) -> bool:
        if "/" in name:
            return name.startswith(_SHIPPED_ONLY) or (REPO / name).exists()
        return resolves(name)

    return sorted(name for name in cited(doc.read_text(encoding="utf-8")) if not exists(name))


def test_every_ocat_name_and_path_the_docs_write_exists() -> None:
    assert REPO / "docs" / "ARCHITECTURE.md" in DOC_FILES
    flagged = [(doc.name, name) for doc in DOC_FILES for name in missing(doc)]
    assert flagged == [], "the docs name these, and ocat has no such module, attribute or file"


def mapped_modules(architecture: str) -> list[str]:
    """The module paths ARCHITECTURE.md's module map names: each row's folder joined to its modules."""
    section = architecture.split("\n## The module map\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| [^|]+ \| `(ocat/[\w/]*)` \| (.+) \|$", section, flags=re.MULTILINE)
    return [folder + name for folder, modules in rows for name in re.findall(r"`(\w+\.py)`", modules)]


def test_the_module_map_names_every_module_once() -> None:
    mapped = mapped_modules((REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8"))
    present = sorted(str(path.relative_to(REPO)) for path in (REPO / "ocat").rglob("*.py") if path.name != "__init__.py")
    assert sorted(set(present) - set(mapped)) == [], "add these modules to ARCHITECTURE.md's module map"
    assert sorted(set(mapped) - set(present)) == [], "ARCHITECTURE.md's module map names modules that are not there"
    assert sorted(mapped) == present, "ARCHITECTURE.md's module map names a module twice"


def test_the_check_flags_made_up_names_and_paths_and_passes_real_ones(tmp_path: Path) -> None:
    doc = tmp_path / "fake.md"
    doc.write_text(
        "Real: `ocat.memory`, `ocat.memory.open_store(settings)`, `ocat.ui.widgets.memory_indicator`,\n"
        "`ocat.memory.storage.store.MemoryStore.add_exchange`, `ocat/chat/turn.py`, `ocat/memory/`,\n"
        "`ocat/_shipped/config/default.yaml`, and a name not in backticks: ocat.no_such_module.\n"
        "Made up: `ocat.no_such_module`, `ocat.memory.no_such_function()`, `ocat.ui.memory_view.memory_indicator`,\n"
        "`ocat.memory.storage.store.MemoryStore.no_such_method`, `ocat/no_such_file.py`, `ocat/ui/nowhere/`.\n",
        encoding="utf-8",
    )
    assert missing(doc) == [
        "ocat.memory.no_such_function",
        "ocat.memory.storage.store.MemoryStore.no_such_method",
        "ocat.no_such_module",
        "ocat.ui.memory_view.memory_indicator",
        "ocat/no_such_file.py",
        "ocat/ui/nowhere/",
    ]
