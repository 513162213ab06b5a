"""No import circles in ocat: every import (at the top or inside a function, outside
`if TYPE_CHECKING:`) is an edge, and the graph of modules has no cycle.

A lazy import inside a function is still a dependency: it hides a circle from Python's
loader, not from a reader. import-linter's layers contracts keep the order of the rooms;
this walks every module, so a circle between two modules of one room is caught too.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ocat"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_names(node: ast.AST, base: list[str]) -> set[str]:
    """The names an import statement imports (a module, or a module and each name from it, any of
    which may be a module); `base`: the package the importing module is in. Empty for other nodes."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    if isinstance(node, ast.ImportFrom):
        if node.level:
            prefix = ".".join(base[: len(base) - node.level + 1])
            target = f"{prefix}.{node.module}" if node.module else prefix
        else:
            target = node.module or ""
        return {target, *(f"{target}.{alias.name}" for alias in node.names)}
    return set()


def _imports(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """Every ocat module `module` imports at run time (imports under TYPE_CHECKING left out)."""
    found: set[str] = set()
    base = module.split(".") if is_package else module.split(".")[:-1]

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        found.update(imported_names(node, base))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {name for name in found if name == "ocat" or name.startswith("ocat.")}


def import_graph() -> dict[str, set[str]]:
    """Module -> the ocat modules it imports (names that are not modules are dropped)."""
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        imported = _imports(ast.parse(path.read_text(encoding="utf-8")), name, path.name == "__init__.py")
        graph[name] = {target for target in imported if target in paths and target != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def test_the_checker_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    tree = ast.parse("import ocat.x\nif TYPE_CHECKING:\n    import ocat.y\ndef f():\n    from ocat import z\n")
    assert _imports(tree, "ocat.m", False) == {"ocat.x", "ocat", "ocat.z"}


def test_ocat_has_no_import_circle() -> None:
    # A package's own __init__ importing its modules (its front door) is not a circle with
    # them unless a module imports the package back.
    assert circles(import_graph()) == []
