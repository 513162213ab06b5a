"""Named stores from the command line: `--store NAME` keeps memories apart; `--store a,b` reads several."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import Cli
from tests.support.fakes import FakeLLMServer

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


READS = [
    ("--vector-store-stats",),
    ("--query-vector-store", "thursday"),
    ("--export-memory", "-"),
    ("--wake",),
    ("--pins",),
    ("--pin", "3f2a9c1e"),
    ("--check-store",),
]


@pytest.mark.parametrize("layout", ["one folder", "a folder per store"])
def test_reading_a_store_that_does_not_exist_is_an_error_that_lists_the_stores(
    cli: Cli, tmp_path: Path, layout: str
) -> None:
    env = {} if layout == "one folder" else {"OCAT_VECTOR_STORE_PATH": None}
    (tmp_path / "work.md").write_text(WORK)
    made = cli("--store", "work", "--add-to-vector-store", str(tmp_path / "work.md"), env=env)
    assert made.returncode == 0, made.stderr
    for args in READS:
        run = cli("--store", "wrok", *args, env=env)
        assert run.returncode == 1, (args, run.stderr)
        assert run.stdout == ""
        assert "no store named 'wrok'; the stores are: work." in run.stderr, (args, run.stderr)
        assert "--add-to-vector-store" in run.stderr and "Traceback" not in run.stderr
    as_json = cli("--store", "wrok", "--vector-store-stats", "--output", "json", env=env)
    assert as_json.returncode == 1 and as_json.json()["ok"] is False
    assert "no store named 'wrok'" in as_json.json()["error"]["message"]
    # Nothing was made by asking: no folder (a folder per store), no collections (one folder).
    listed = cli("--store", "work", "--vector-store-stats", "--output", "json", env=env).json()["result"]["stores"]
    assert listed == ["work"]
    assert not (Path(cli.home) / ".local/share/ocat/vector_stores/wrok").exists()
    # Several stores: each must exist.
    both = cli("--store", "work,wrok", "--query-vector-store", "thursday", env=env)
    assert both.returncode == 1 and "no store named 'wrok'" in both.stderr


def test_the_first_write_to_a_named_store_makes_it_and_says_so(
    cli: Cli, tmp_path: Path, llm_server: FakeLLMServer
) -> None:
    (tmp_path / "work.md").write_text(WORK)
    first = cli("--store", "work", "--add-to-vector-store", str(tmp_path / "work.md"))
    assert first.returncode == 0, first.stderr
    assert f"ocat: created store work at {cli.store_path}" in first.stderr
    again = cli("--store", "work", "--add-to-vector-store", str(tmp_path / "work.md"))
    assert again.returncode == 0 and "created store" not in again.stderr
    # A write that fails before it writes makes nothing, and says nothing.
    missing = cli("--store", "other", "--add-to-vector-store", str(tmp_path / "nowhere.md"))
    assert missing.returncode == 1 and "created store" not in missing.stderr
    assert cli("--store", "other", "--vector-store-stats").returncode == 1
    # An ask writes its exchange: the store is made ("~" is the home folder, per store).
    model = ["--model", "openai/fake-model", "--set", f"llm.api_base={llm_server.api_base}", "--set", "llm.api_key=k"]
    asked = cli("--store", "asked", "--ask", "hello", *model, env={"OCAT_VECTOR_STORE_PATH": None})
    assert asked.returncode == 0, asked.stderr
    assert "created store asked at ~/.local/share/ocat/vector_stores/asked" in asked.stderr


def test_the_configured_store_is_made_silently_on_first_use(cli: Cli, tmp_path: Path) -> None:
    # A new user's first command never fails for want of a store: the default is made quietly.
    run = cli("--vector-store-stats", "--output", "json", env={"OCAT_VECTOR_STORE_PATH": None})
    assert run.returncode == 0, run.stderr
    assert run.json()["result"]["exchanges"] == 0 and "created store" not in run.stderr
    # Naming the default, or the store the config names, is no typo either.
    named = cli("--store", "default", "--vector-store-stats", env={"OCAT_VECTOR_STORE_PATH": None})
    assert named.returncode == 0, named.stderr
    config = tmp_path / "config.yaml"
    config.write_text("vector_store:\n  collection: journal\n")
    configured = cli("--config", str(config), "--store", "journal", "--vector-store-stats")
    assert configured.returncode == 0, configured.stderr


def test_a_chat_on_a_new_named_store_says_it_makes_it(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "work.md").write_text(WORK)
    assert cli("--store", "work", "--add-to-vector-store", str(tmp_path / "work.md")).returncode == 0
    run = cli("--store", "wrok", "--plain", "--dummy-mode", input="hello\n")
    assert run.returncode == 0, run.stderr
    assert f"ocat: store wrok is new: this chat makes it at {cli.store_path} (the stores so far: work)" in run.stderr
    known = cli("--store", "work", "--plain", "--dummy-mode", input="hello\n")
    assert known.returncode == 0 and "is new" not in known.stderr
