"""ocat's imports as a graph, read from the source with `ast` (nothing is imported), and its circles.

Every `import` and `from ... import` is an edge: at a module's top or inside a function. Those
under `if TYPE_CHECKING:` are edges too unless `type_checking=False` (the run-time graph).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
PACKAGE = ROOT / "ocat"


def module_name(path: Path, root: Path = ROOT) -> str:
    """`ocat/chat/turn.py` -> `ocat.chat.turn` (relative to `root`); a package's `__init__.py` is the package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(tree: ast.AST, module: str, is_package: bool, *, type_checking: bool = True) -> set[str]:
    """Every ocat name `module` imports (modules, and `module.name` for each name it takes from
    one); with `type_checking=False`, those under `if TYPE_CHECKING:` are left out."""
    found: set[str] = set()
    base = module.split(".") if is_package else module.split(".")[:-1]

    def visit(node: ast.AST) -> None:
        if not type_checking and isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                prefix = ".".join(base[: len(base) - node.level + 1])
                target = f"{prefix}.{node.module}" if node.module else prefix
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {name for name in found if name == "ocat" or name.startswith("ocat.")}


def import_graph(*, type_checking: bool = True, package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the ocat modules it imports (names that are not modules are dropped)."""
    paths = {module_name(p, package.parent): p for p in package.rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        stat = path.stat()
        every, at_run_time = _imports_of(path, stat.st_mtime_ns, stat.st_size, name)
        imported = every if type_checking else at_run_time
        graph[name] = {target for target in imported if target in paths and target != name}
    return graph


@functools.lru_cache(maxsize=4096)
def _imports_of(path: Path, mtime_ns: int, size: int, name: str) -> tuple[frozenset[str], frozenset[str]]:
    # Five tests of a worker read the same 300 files, with and without type-only imports:
    # parsing them was ~1 s of each. Both sets come from one parse, kept by the file's time and
    # size, so a file changed meanwhile (a test writes a package of its own) is read again.
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = path.name == "__init__.py"
    return (frozenset(imports(tree, name, package)), frozenset(imports(tree, name, package, type_checking=False)))


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm), each sorted."""
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
