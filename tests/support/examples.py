"""How many examples a property test (Hypothesis) runs: all of them in the full suite, which CI
runs, and an eighth in the quick loop (`-m "not slow"`), which a maintainer runs after each edit.

The quick loop is for "did this change break something": an eighth of the examples (at least
five) still walks every rule of each property, while the whole count, derandomized, is what
guards a release. A quarter was 15 s of the quick loop's ~130 s of CPU; an eighth is half that. tests/conftest.py decides which run this is before any test module is imported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# The least a quick run takes, however small the full count.
QUICK_FLOOR = 5
# The quick loop runs 1/QUICK_SHARE of each property test's examples.
QUICK_SHARE = 8


class _Budget:
    quick = False


BUDGET = _Budget()


def examples(full: int) -> int:
    """`full` in the full suite; an eighth of it (at least QUICK_FLOOR) in the quick loop."""
    return max(QUICK_FLOOR, full // QUICK_SHARE) if BUDGET.quick else full


def is_quick_loop(markexpr: str) -> bool:
    """Whether a run's `-m` expression is the quick loop's: one that leaves the slow tests out."""
    return " ".join(markexpr.split()) == "not slow"


def is_property_test(item: Any) -> bool:
    """Whether a collected test (a pytest item) is a property test: one that Hypothesis drives
    (`@given`), or a stateful machine's test case in tests/property/. These are the suite's
    longest tests in a full run, so tests/conftest.py runs them first."""
    function = getattr(item, "function", None)
    if getattr(function, "is_hypothesis_test", False):
        return True
    return "property" in getattr(item, "path", Path()).parts
