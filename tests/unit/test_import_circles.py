"""No import circles in ocat: every import (at the top or inside a function, outside
`if TYPE_CHECKING:`) is an edge, and the graph of modules has no cycle.

A lazy import inside a function is still a dependency: it hides a circle from Python's
loader, not from a reader. import-linter's layers contracts keep the order of the rooms;
this walks every module, so a circle between two modules of one room is caught too.
"""

from __future__ import annotations

import ast

from tests.support.import_graph import circles, import_graph, imports


def test_the_checker_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    tree = ast.parse("import ocat.x\nif TYPE_CHECKING:\n    import ocat.y\ndef f():\n    from ocat import z\n")
    assert imports(tree, "ocat.m", False, type_checking=False) == {"ocat.x", "ocat", "ocat.z"}


def test_ocat_has_no_import_circle() -> None:
    # A package's own __init__ importing its modules (its front door) is not a circle with
    # them unless a module imports the package back.
    assert circles(import_graph(type_checking=False)) == []
