"""Where things are, for tests in any folder under tests/: the repository, tests/ and tests/support/."""

from __future__ import annotations

from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
TESTS = SUPPORT.parent
REPO = TESTS.parent
