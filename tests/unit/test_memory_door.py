"""Memory's front door (ocat.memory): every name it exports resolves to its room's object, and
importing the door loads none of the rooms (each loads on first use). The rest of ocat imports
only the door: an import-linter contract in pyproject.toml keeps that."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import ocat.memory


@pytest.mark.parametrize("name", ocat.memory.__all__)
def test_every_exported_name_is_its_rooms_object(name: str) -> None:
    module, attribute = ocat.memory._ROOMS[name]
    assert getattr(ocat.memory, name) is getattr(importlib.import_module(module), attribute)
    assert name in dir(ocat.memory)


def test_the_doors_table_names_what_the_type_checker_reads() -> None:
    # The door's names are written twice: as imports under TYPE_CHECKING (for mypy) and in its
    # table (for run time). They must be the same names from the same rooms.
    import ast
    from pathlib import Path

    tree = ast.parse(Path(ocat.memory.__file__).read_text(encoding="utf-8"))
    guarded = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    imported = {
        alias.asname or alias.name: (str(node.module), alias.name)
        for node in guarded.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert imported == ocat.memory._ROOMS


def test_a_name_the_door_does_not_export_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'no_such_thing'"):
        ocat.memory.no_such_thing  # noqa: B018


def test_the_door_always_gives_what_the_room_holds_now(monkeypatch: pytest.MonkeyPatch) -> None:
    # Not kept at the door: a stand-in put in the room (as tests do) is what callers get, and
    # the real one again once it is taken away.
    from ocat.memory.storage import pins

    real = pins.set_pinned
    monkeypatch.setattr(pins, "set_pinned", "stand-in")
    assert ocat.memory.set_pinned == "stand-in"
    monkeypatch.undo()
    assert ocat.memory.set_pinned is real


@pytest.mark.slow  # a fresh interpreter
def test_importing_the_door_loads_no_room() -> None:
    code = (
        "import sys, ocat.memory\n"
        "print(sorted(m for m in sys.modules if m.startswith('ocat.memory.')))\n"
        "from ocat.memory import project_of\n"
        "print('ocat.memory.retrieval.project_scope' in sys.modules, 'chromadb' in sys.modules)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["[]", "True False"]


def test_nothing_outside_memory_reads_the_lexical_index() -> None:
    # The store answers id prefixes and the thread catalogue itself (MemoryStore.ids_starting,
    # chunk_ids, threads_starting, recent_threads, thread_titles): the index is memory's own.
    import re
    from pathlib import Path

    package = Path(ocat.memory.__file__).parent.parent
    reaching = [
        f"{path.relative_to(package.parent)}:{n}"
        for path in package.rglob("*.py")
        if package / "memory" not in path.parents
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if re.search(r"\.lexical\b", line)
    ]
    assert reaching == []
