"""The house's sizes, kept by a check: a module of ocat past 500 lines is a warning, past 600 a
failure, and at most 16 modules stay directly in `ocat/` (the rest live in the rooms that show
the architecture). A module is split by what it does, not to get under a number: a long module
that reads as one thing is better than two that each need the other (issue 50)."""

from __future__ import annotations

import warnings
from pathlib import Path
from tests.support.paths import REPO

PACKAGE = REPO / "ocat"
WARN_LINES = 500
MAX_LINES = 600
MAX_TOP_LEVEL_MODULES = 16


def module_sizes(package: Path = PACKAGE) -> dict[str, int]:
    """Each module's path (from the repository) and its number of lines."""
    return {path.relative_to(package.parent).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
            for path in package.rglob("*.py")}


def over(sizes: dict[str, int], lines: int) -> dict[str, int]:
    """The modules longer than `lines`."""
    return {name: count for name, count in sizes.items() if count > lines}


def test_no_module_passes_600_lines_and_one_past_500_is_a_warning() -> None:
    sizes = module_sizes()
    assert len(sizes) > 100, "ocat's modules were not found"
    long = over(sizes, WARN_LINES)
    if long:
        warnings.warn(f"modules past {WARN_LINES} lines: {long}; does each still do one thing?", stacklevel=1)
    assert over(sizes, MAX_LINES) == {}


def test_the_limits_are_a_warning_at_500_and_a_failure_at_600(tmp_path: Path) -> None:
    package = tmp_path / "ocat"
    package.mkdir()
    for name, lines in {"short.py": 450, "long.py": 550, "too_long.py": 601}.items():
        (package / name).write_text("x = 1\n" * lines, encoding="utf-8")
    sizes = module_sizes(package)
    assert over(sizes, WARN_LINES) == {"ocat/long.py": 550, "ocat/too_long.py": 601}
    assert over(sizes, MAX_LINES) == {"ocat/too_long.py": 601}


def test_at_most_16_modules_sit_directly_in_ocat() -> None:
    top = sorted(path.name for path in PACKAGE.glob("*.py") if path.name != "__init__.py")
    assert 0 < len(top) <= MAX_TOP_LEVEL_MODULES, top
