"""tests/README.md, the index of where the tests of each part are, names every test file once,
only files that exist, and only modules of ocat that exist."""

from __future__ import annotations

import importlib.util
import re
from collections import Counter
from tests.support.paths import TESTS

INDEX = (TESTS / "README.md").read_text(encoding="utf-8")


def test_every_test_file_is_listed_once_and_every_listed_file_exists() -> None:
    listed = Counter(re.findall(r"^\| (test_\w+\.py) \|", INDEX, flags=re.MULTILINE))
    on_disk = {path.name for path in TESTS.rglob("test_*.py")}
    assert [name for name, count in listed.items() if count > 1] == []
    assert sorted(on_disk - set(listed)) == [], "add them to tests/README.md"
    assert sorted(set(listed) - on_disk) == [], "tests/README.md lists files that are gone"


def test_each_test_file_is_in_the_folder_of_its_first_kind() -> None:
    """Tests live by kind (unit, model, cli, app, property): the first kind of a file's row."""
    rows = re.findall(r"^\| (test_\w+\.py) \|[^\n]*\| ([a-z]+)[a-z, ]* \|$", INDEX, flags=re.MULTILINE)
    assert len(rows) > 50  # the scan works
    misplaced = [f"{name} in {path.parent.name}/, not {kind}/" for name, kind in rows
                 for path in TESTS.rglob(name) if path.parent.name != kind]
    assert misplaced == []
    assert sorted(p.name for p in TESTS.glob("test_*.py")) == [], "tests/ itself holds no test file"


def test_the_modules_the_index_names_exist() -> None:
    names = set(re.findall(r"`(ocat(?:\.\w+)+)`", INDEX))
    assert "ocat.chat.turn" in names  # the scan works
    assert sorted(name for name in names if importlib.util.find_spec(name) is None) == []
