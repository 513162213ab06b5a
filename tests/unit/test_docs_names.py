"""The docs cannot name what is not there: every `ocat.…` name and `ocat/…` path written in
backticks in docs/*.md (ARCHITECTURE.md among them) and README.md is a module, an attribute of
one, or a file or folder of the repository; and ARCHITECTURE.md's module map names every module.
And one name per thing in the code the docs name: `memory` is the package alone, and a public
name is defined in one module (issue 50)."""

from __future__ import annotations

import ast
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


# ---- one name per thing ----------------------------------------------------------------------

def memory_names(source: str) -> list[str]:
    """Where `source` gives the name `memory` to something other than the package: a parameter,
    a variable, an attribute set, a function or a class (`line: what`)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.arg) and node.arg == "memory":
            found.append(f"{node.lineno}: a parameter")
        elif isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Store) and (
                getattr(node, "id", None) == "memory" or getattr(node, "attr", None) == "memory"):
            found.append(f"{node.lineno}: {'a variable' if isinstance(node, ast.Name) else 'an attribute'}")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == "memory":
            found.append(f"{node.lineno}: a {'class' if isinstance(node, ast.ClassDef) else 'function'}")
    return sorted(found, key=lambda said: int(said.split(":")[0]))


# Where `memory` may name something else: the config's `memory` section and its `keys.memory`
# binding are names users write (fields of the settings' dataclasses).
_CONFIG_NAMES = REPO / "ocat" / "config" / "settings.py"


def test_memory_in_the_code_names_the_package_alone() -> None:
    """"memory" named five things (issue 50): the package, the session's part of it (now
    `session_memory`), the window's (`memory_view`), the wake block's settings (now `settings.wake`)
    and a parameter. A value called `memory` beside `from ocat import memory` hides one or the other."""
    found = {str(path.relative_to(REPO)): memory_names(path.read_text(encoding="utf-8"))
             for path in sorted((REPO / "ocat").rglob("*.py")) if path != _CONFIG_NAMES}
    assert {path: where for path, where in found.items() if where} == {}, (
        "name these for what they hold (session_memory, memory_view, ...): `memory` is the package")


def test_the_memory_name_check_finds_each_kind_of_use() -> None:
    source = ("from ocat import memory\nmemory.open_store(x)\ndef f(memory): pass\nmemory = 1\n"
              "self.memory = 2\ndef memory(): pass\nclass memory: pass\nsettings.memory.secrets\n")
    assert memory_names(source) == ["3: a parameter", "4: a variable", "5: an attribute", "6: a function",
                                    "7: a class"]


def public_definitions(sources: dict[str, str]) -> dict[str, list[str]]:
    """Each public function or class defined at the top of more than one module: its modules."""
    where: dict[str, list[str]] = {}
    for module, source in sources.items():
        for node in ast.parse(source).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                where.setdefault(node.name, []).append(module)
    return {name: modules for name, modules in where.items() if len(modules) > 1}


# The public names that two modules define today, each looked at and kept, with why. A new one
# fails the test below: name the new function for what it does (`open_store` and `warm_up`
# each named two functions once; now `open_configured_store` and `warm_memory` are the others).
SHARED_NAMES = {
    # One protocol, kept by several modules on purpose.
    "conversation": "each history reader's (ocat.history_import.readers finds them by format)",
    "read_session": "each agent-session reader's (claude_code, codex)",
    "main": "each runnable module's entry point (python -m ocat.cli.reference)",
    "serve": "ocat.mcp_server's front door, which imports the server only when called",
    "unlink": "operations' face of the storage operation, given an id's start",
    "versions": "operations' face of the storage operation, given an id's start",
    # Two things: left as they are, in files that are others' to change (the gate's, the turn's).
    "Candidate": "a completion (ocat.completion) and a search's scores (memory.retrieval, the gate's)",
    "Change": "the model's word on a link (memory.consolidate) and a change-log entry (memory.storage)",
    "Filters": "the browser's choices (operations.browse) and a search's conditions (memory.retrieval)",
    "Found": "a secret found in a text (text.secrets) and a search hit (operations.search)",
    "Link": "a finder's link (memory.storage.version_finder) and an export line's (memory.storage.export_lines)",
    "link_of": "a thread's fork link (operations.forks) and a record's version link (memory.storage)",
    "parse_arguments": "a tool call's JSON arguments (tools.box) and a slash command's (commands.arguments)",
    "remember": "/remember's note and pin (operations.wake) and the model's remember tool (tools)",
}


def _ocat_sources() -> dict[str, str]:
    return {str(path.relative_to(REPO)): path.read_text(encoding="utf-8")
            for path in sorted((REPO / "ocat").rglob("*.py"))}


def test_a_public_name_is_defined_in_one_module() -> None:
    shared = public_definitions(_ocat_sources())
    assert {name: shared[name] for name in sorted(set(shared) - set(SHARED_NAMES))} == {}, (
        "these names are defined in two modules: name each for what it does (or say why in SHARED_NAMES)")
    assert sorted(set(SHARED_NAMES) - set(shared)) == [], "no longer shared: take these out of SHARED_NAMES"
    assert "open_store" not in shared and "warm_up" not in shared


def test_the_shared_name_check_finds_a_name_two_modules_define() -> None:
    sources = {"a.py": "def open_store(): pass\nclass Hit: pass\ndef _own(): pass\n",
               "b.py": "def open_store(x): pass\ndef _own(): pass\nHit = 1\n"}
    assert public_definitions(sources) == {"open_store": ["a.py", "b.py"]}
