"""The quick loop runs a quarter of each property test's examples; the full suite all of them."""

from __future__ import annotations

import pytest

from tests.support.examples import BUDGET, QUICK_FLOOR, examples, is_quick_loop


@pytest.mark.parametrize("expression, quick", [
    ("not slow", True), ("not   slow", True), (" not slow ", True),
    ("", False), ("slow", False), ("not slow and not app", False),
])
def test_only_the_quick_loops_expression_is_the_quick_loop(expression: str, quick: bool) -> None:
    assert is_quick_loop(expression) is quick


def test_a_quick_run_takes_a_quarter_and_never_fewer_than_the_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(BUDGET, "quick", False)
    assert examples(200) == 200 and examples(3) == 3
    monkeypatch.setattr(BUDGET, "quick", True)
    assert examples(200) == 50 and examples(3) == QUICK_FLOOR


def test_this_run_knows_which_it_is(request: pytest.FixtureRequest) -> None:
    assert BUDGET.quick is is_quick_loop(request.config.getoption("markexpr") or "")
