"""Every committed snapshot belongs to a test. syrupy fails a serial run on a snapshot no test
used, but under pytest-xdist (`-n auto`, the README's command) it skips that check: this keeps
a renamed or deleted snapshot test from leaving its picture behind unnoticed."""

from __future__ import annotations

import re
from tests.support.paths import TESTS


def test_every_snapshot_is_named_after_a_test_in_its_module() -> None:
    pictures = sorted(TESTS.glob("*/__snapshots__/*/*.svg"))
    assert pictures, f"no snapshots found under {TESTS}/<kind>/__snapshots__"
    orphans = []
    for picture in pictures:
        module = picture.parent.parent.parent / f"{picture.parent.name}.py"
        test = picture.stem.split("[", 1)[0]  # a parametrized test's pictures are `name[id].svg`
        source = module.read_text(encoding="utf-8") if module.is_file() else ""
        if not re.search(rf"^(async )?def {re.escape(test)}\(", source, re.MULTILINE):
            orphans.append(str(picture.relative_to(TESTS)))
    assert orphans == [], "snapshots of no test (delete them, or refresh with --snapshot-update, serially)"
