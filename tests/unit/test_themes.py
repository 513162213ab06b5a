"""Theme files: shipped ones are valid, bad ones are named and skipped."""

from __future__ import annotations

from pathlib import Path

import pytest

from ocat.config.locations import shipped_dir
from ocat.config.themes import check_theme, load_themes


def test_every_shipped_theme_is_valid() -> None:
    themes, problems = load_themes([shipped_dir("themes")])
    assert problems == []
    assert {t["name"] for t in themes} >= {"ocat-night", "ocat-paper"}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (["a list"], "mapping"),
        ({"name": "x", "primary": "#fff", "sparkle": True}, "unknown field"),
        ({"name": "Bad Name", "primary": "#fff"}, "'name'"),
        ({"name": "x"}, "'primary' is required"),
        ({"name": "x", "primary": "red"}, "hex colour"),
        ({"name": "x", "primary": "#fff", "dark": "yes"}, "'dark'"),
    ],
)
def test_bad_themes_are_explained(data: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_theme(data, "t.yaml")


def test_a_user_theme_overrides_a_shipped_one_of_the_same_name(tmp_path: Path) -> None:
    shipped, user = tmp_path / "a", tmp_path / "b"
    shipped.mkdir()
    user.mkdir()
    (shipped / "t.yaml").write_text("name: same\nprimary: '#000000'\n")
    (user / "t.yaml").write_text("name: same\nprimary: '#ffffff'\n")
    (user / "bad.yaml").write_text("name: [unclosed\n")
    themes, problems = load_themes([shipped, user])
    assert [t["primary"] for t in themes] == ["#ffffff"]
    assert len(problems) == 1 and "bad.yaml" in problems[0]
