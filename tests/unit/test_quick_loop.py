"""The quick loop runs a quarter of each property test's examples; the full suite all of them."""

from __future__ import annotations

import ast

import pytest

from tests.support.examples import BUDGET, QUICK_FLOOR, examples, is_quick_loop
from tests.support.paths import REPO


@pytest.mark.parametrize("expression, quick", [
    ("not slow", True), ("not   slow", True), (" not slow ", True),
    ("", False), ("slow", False), ("not slow and not app", False),
])
def test_only_the_quick_loops_expression_is_the_quick_loop(expression: str, quick: bool) -> None:
    assert is_quick_loop(expression) is quick


def test_a_quick_run_takes_an_eighth_and_never_fewer_than_the_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(BUDGET, "quick", False)
    assert examples(200) == 200 and examples(3) == 3
    monkeypatch.setattr(BUDGET, "quick", True)
    assert examples(200) == 25 and examples(3) == QUICK_FLOOR


def test_this_run_knows_which_it_is(request: pytest.FixtureRequest) -> None:
    assert BUDGET.quick is is_quick_loop(request.config.getoption("markexpr") or "")


def _named(call: ast.expr, name: str) -> bool:
    return isinstance(call, ast.Call) and getattr(call.func, "id", getattr(call.func, "attr", None)) == name


def test_every_property_test_takes_its_count_from_the_budget() -> None:
    """A property test whose count bypasses examples() runs all of it in the quick loop (one ran
    40 stores where 10 were its share), and one with no count runs Hypothesis's 100 in both."""
    bypassing = []
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        text = path.read_text(encoding="utf-8")
        if "given" not in text and "settings" not in text:
            continue  # no property test here: parsing every test file was most of this test's second
        tree = ast.parse(text)
        where = path.relative_to(REPO)
        for node in ast.walk(tree):
            if _named(node, "settings"):
                for keyword in node.keywords:  # type: ignore[attr-defined]
                    if keyword.arg == "max_examples" and not any(_named(n, "examples") for n in ast.walk(keyword.value)):
                        bypassing.append(f"{where}:{node.lineno}: max_examples without examples()")
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(_named(d, "given") for d in node.decorator_list):
                counted = [d for d in node.decorator_list
                           if _named(d, "settings") and any(k.arg == "max_examples" for k in d.keywords)]  # type: ignore[attr-defined]
                if not counted:
                    bypassing.append(f"{where}:{node.lineno}: {node.name} has no @settings(max_examples=examples(...))")
    assert bypassing == []
