"""No circles between ocat's packages, nor between the files of a package: every import counts,
the type-only ones under `if TYPE_CHECKING:` too (they tie two modules as tightly for a reader,
and mypy follows them). Read from the source with `ast` (tests/support/import_graph.py).

tests/unit/test_import_circles.py walks the run-time imports of all of ocat; this one is stricter
(type-only imports count) and is kept package by package: `FILE_LEVEL` lists the packages held
to it, `PENDING` those not yet, each with why.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.import_graph import PACKAGE, circles, import_graph, module_name

# Packages whose files import each other in a circle that is being taken apart elsewhere, each
# with why; a circle that passes through one of them is left out until then. None is left: the
# last, ocat.memory.storage, gave its functions a narrow collaborator (issue 50, part 4).
PENDING: dict[str, str] = {}

# The packages whose files import each other in no circle. A new package goes here.
FILE_LEVEL = [
    "ocat",
    "ocat.chat",
    "ocat.cli",
    "ocat.commands",
    "ocat.config",
    "ocat.headless",
    "ocat.history_import",
    "ocat.llm",
    "ocat.mcp_client",
    "ocat.mcp_server",
    "ocat.memory",
    "ocat.memory.embedding",
    "ocat.memory.ingest",
    "ocat.memory.retrieval",
    "ocat.memory.sharing",
    "ocat.memory.storage",
    "ocat.operations",
    "ocat.text",
    "ocat.tools",
    "ocat.ui",
]


def package_of(module: str, packages: set[str]) -> str:
    """The package a module sits in directly (a package's own `__init__` is in that package)."""
    return module if module in packages else module.rpartition(".")[0]


def packages(root: Path = PACKAGE) -> set[str]:
    """Every package under `root`, by its dotted name."""
    return {module_name(init, root.parent) for init in root.rglob("__init__.py")}


def top_level_graph(graph: dict[str, set[str]], top: str = "ocat") -> dict[str, set[str]]:
    """The graph between the parts directly under `top` (a sub-package stands for all of its
    modules, a module for itself); imports of the root package itself are left out."""
    def part(module: str) -> str:
        return ".".join(module.split(".")[:2])

    collapsed: dict[str, set[str]] = {}
    for source, targets in graph.items():
        if source == top:
            continue
        collapsed.setdefault(part(source), set()).update(
            part(target) for target in targets if target != top and part(target) != part(source))
    return collapsed


def file_circles(graph: dict[str, set[str]], checked: list[str], pending: dict[str, str]) -> list[list[str]]:
    """The circles between modules that touch a checked package, and pass through no pending one."""
    known = set(checked) | set(pending)
    kept = []
    for circle in circles(graph):
        homes = {package_of(module, known) for module in circle}
        if homes & set(pending):
            continue
        if homes & set(checked):
            kept.append(circle)
    return kept


def test_the_checkers_see_a_type_only_circle(tmp_path: Path) -> None:
    root = tmp_path / "ocat"
    for folder in ("a", "b"):
        (root / folder).mkdir(parents=True)
        (root / folder / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "a" / "one.py").write_text("from ocat.b.two import Two\n")
    (root / "a" / "three.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ocat.a.four import F\n")
    (root / "a" / "four.py").write_text("def f():\n    from ocat.a import three\n")
    (root / "b" / "two.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ocat.a.one import One\n")
    graph = import_graph(package=root)
    assert circles(top_level_graph(graph)) == [["ocat.a", "ocat.b"]]
    assert file_circles(graph, ["ocat.a"], {}) == [["ocat.a.four", "ocat.a.three"], ["ocat.a.one", "ocat.b.two"]]
    assert file_circles(graph, ["ocat.a"], {"ocat.b": "elsewhere"}) == [["ocat.a.four", "ocat.a.three"]]
    assert circles(top_level_graph(import_graph(package=root, type_checking=False))) == []


def test_no_two_packages_of_ocat_import_each_other() -> None:
    # config <-> mcp_client (the servers' settings), llm <-> tools (the assembler of streamed
    # calls) and config <-> text (the chunking settings) were such circles.
    assert circles(top_level_graph(import_graph())) == []


def test_no_files_of_a_checked_package_import_each_other_in_a_circle() -> None:
    assert file_circles(import_graph(), FILE_LEVEL, PENDING) == []


def test_every_package_is_checked_or_pending_with_a_reason() -> None:
    assert sorted(packages()) == sorted(FILE_LEVEL + list(PENDING))
