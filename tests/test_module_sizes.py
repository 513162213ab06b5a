"""The house's sizes, kept by a check: no module of ocat passes 400 lines, and at most 16 stay
directly in `ocat/` (the rest live in the rooms that show the architecture)."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "ocat"
MAX_LINES = 400
MAX_TOP_LEVEL_MODULES = 16


def test_no_module_passes_400_lines() -> None:
    sizes = {path.relative_to(PACKAGE.parent).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
             for path in PACKAGE.rglob("*.py")}
    assert len(sizes) > 100, "ocat's modules were not found"
    # A module that grows past this is split by what it does (docs/ARCHITECTURE.md's module map).
    assert {name: lines for name, lines in sizes.items() if lines > MAX_LINES} == {}


def test_at_most_16_modules_sit_directly_in_ocat() -> None:
    top = sorted(path.name for path in PACKAGE.glob("*.py") if path.name != "__init__.py")
    assert 0 < len(top) <= MAX_TOP_LEVEL_MODULES, top
