"""Named stores from the command line: `--store NAME` keeps memories apart; `--store a,b` reads several."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import Cli

WORK = "The quarterly budget review moved to Thursday at 10am."
HOME = "The dentist appointment moved to Thursday at 10am."


@pytest.mark.parametrize("layout", ["one folder", "a folder per store"])
def test_stores_are_separate_and_can_be_read_together(cli: Cli, tmp_path: Path, layout: str) -> None:
    # One folder: vector_store.path is set, so both stores' collections live in it (and one
    # process holds it once for both); otherwise each store has its own XDG folder.
    env = {} if layout == "one folder" else {"OCAT_VECTOR_STORE_PATH": None}
    (tmp_path / "work.md").write_text(WORK)
    (tmp_path / "home.md").write_text(HOME)
    assert cli("--store", "work", "--add-to-vector-store", str(tmp_path / "work.md"), env=env).returncode == 0
    assert cli("--store", "personal", "--add-to-vector-store", str(tmp_path / "home.md"), env=env).returncode == 0

    def texts(store: str) -> list[tuple[str, str]]:
        run = cli("--store", store, "--query-vector-store", "what moved to Thursday?", "--output", "json", env=env)
        assert run.returncode == 0, run.stderr
        return [(hit["store"], hit["text"]) for hit in run.json()["result"]["results"]]

    assert texts("work") == [("work", WORK)]
    assert texts("personal") == [("personal", HOME)]
    assert sorted(texts("work,personal")) == [("personal", HOME), ("work", WORK)]
    assert cli("--query-vector-store", "Thursday", "--output", "json", env=env).json()["result"]["results"] == []

    stats = cli("--store", "work", "--vector-store-stats", "--output", "json", env=env).json()["result"]
    assert stats["collection"] == "work" and stats["documents"] == 1
    assert stats["stores"] == ["default", "personal", "work"]  # the query above opened (made) "default"
    both = cli("--store", "work,personal", "--vector-store-stats", "--output", "json", env=env).json()["result"]
    assert [s["collection"] for s in both["selected"]] == ["work", "personal"]
    text = cli("--store", "work,personal", "--query-vector-store", "Thursday", env=env).stdout
    assert "[work]" in text and "[personal]" in text


def test_writing_to_several_stores_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    notes = tmp_path / "n.md"
    notes.write_text(WORK)
    for args in (
        ("--add-to-vector-store", str(notes)),
        ("--import-memory", str(notes)),
        ("--ask", "hello", "--dummy-mode"),
        ("--plain", "--dummy-mode"),
    ):
        run = cli("--store", "alpha,beta", *args)
        assert run.returncode == 2, (args, run.stderr)
        assert "can only be read" in run.stderr
    bad = cli("--store", "a,b", "--vector-store-stats")
    assert bad.returncode == 2 and "not a store name" in bad.stderr  # names are 3-63 characters
