"""No file-level import cycle inside the packages listed here, counting every import: at the top,
inside a function, and under `if TYPE_CHECKING:` (a type-only import is still a file that must be
read to understand the other; tests/test_import_circles.py leaves those out, for all of ocat).

Add a package to PACKAGES once its files import each other in one direction only.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_import_circles import circles, imported_names

ROOT = Path(__file__).resolve().parent.parent
# The packages whose files never import each other in a circle (type-only imports too).
PACKAGES = ("ocat/chat",)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def every_import(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """Every module name `module` imports, wherever the import stands (TYPE_CHECKING too)."""
    base = module.split(".") if is_package else module.split(".")[:-1]
    return {name for node in ast.walk(tree) for name in imported_names(node, base)}


def package_graph(package: str) -> dict[str, set[str]]:
    """Module of `package` -> the modules of the same package it imports (its own front door left out)."""
    folder = ROOT / package
    paths = {_module_name(p): p for p in folder.rglob("*.py") if p.name != "__init__.py"}
    return {name: {target for target in every_import(ast.parse(path.read_text(encoding="utf-8")), name, False)
                   if target in paths and target != name}
            for name, path in paths.items()}


def test_a_type_only_import_is_an_edge() -> None:
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ocat.chat.b import B\n")
    assert "ocat.chat.b" in every_import(tree, "ocat.chat.a", False)
    assert circles({"ocat.chat.a": {"ocat.chat.b"}, "ocat.chat.b": {"ocat.chat.a"}}) == [["ocat.chat.a", "ocat.chat.b"]]


def test_no_file_level_cycle_inside_the_listed_packages() -> None:
    for package in PACKAGES:
        assert circles(package_graph(package)) == [], package
