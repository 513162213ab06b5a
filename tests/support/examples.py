"""How many examples a property test (Hypothesis) runs: all of them in the full suite, which CI
runs, and a quarter in the quick loop (`-m "not slow"`), which a maintainer runs after each edit.

The quick loop is for "did this change break something": a quarter of the examples still
walks every rule of each property, while the whole count, derandomized, is what guards a
release. tests/conftest.py decides which run this is before any test module is imported.
"""

from __future__ import annotations

# The least a quick run takes, however small the full count.
QUICK_FLOOR = 5


class _Budget:
    quick = False


BUDGET = _Budget()


def examples(full: int) -> int:
    """`full` in the full suite; a quarter of it (at least QUICK_FLOOR) in the quick loop."""
    return max(QUICK_FLOOR, full // 4) if BUDGET.quick else full


def is_quick_loop(markexpr: str) -> bool:
    """Whether a run's `-m` expression is the quick loop's: one that leaves the slow tests out."""
    return " ".join(markexpr.split()) == "not slow"
