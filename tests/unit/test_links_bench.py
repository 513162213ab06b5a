"""bench/recall_changing.py --links: the finder's links judged against the README's table of versions."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from bench.recall_changing import link_quality


class _Store:
    """What link_quality reads of a store: each exchange's metadata."""

    def __init__(self, links: dict[str, str]) -> None:
        self.links = links

    def iter_metadata(self, kind: str) -> Iterator[tuple[str, dict[str, Any]]]:
        for older, newer in self.links.items():
            yield older, {"updated_by": newer, "update_evidence": f"{older} value -> {newer} value"}
        yield "id-lone", {}


def _dev_set(tmp_path: Path) -> Path:
    """A set in changing-dev's layout: index.tsv (key, id, thread, ..., date) and a README table
    of versions (`t01-e01` → `t02-e01` → `t03-e01`; `t04-e01` → `t05-e01`)."""
    rows = ["key\tid\tthread\tturn\tdate"] + [f"t0{n}-e01\tid-{n}\tt0{n}\t1\t2025-0{n}-01" for n in range(1, 6)]
    (tmp_path / "index.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (tmp_path / "README.md").write_text(
        "| fact | versions |\n|---|---|\n| dose | `t01-e01` → `t02-e01` → `t03-e01` |\n"
        "| flight | `t04-e01` → `t05-e01` |\n", encoding="utf-8")
    return tmp_path


def test_each_link_is_right_a_chain_or_wrong_and_the_missed_pairs_are_named(tmp_path: Path) -> None:
    folder = _dev_set(tmp_path)
    # right: 1 -> 2; chain: 1's fact reaches 3 only through 2 (2 -> 3 is not found); wrong: 4 -> 3.
    quality = link_quality(_Store({"id-1": "id-2", "id-2": "id-1", "id-4": "id-3"}), folder)
    verdicts = {(q["older"], q["newer"]): q["verdict"] for q in quality["listed"]}
    assert verdicts == {("t01-e01", "t02-e01"): "right", ("t02-e01", "t01-e01"): "wrong",
                        ("t04-e01", "t03-e01"): "wrong"}
    assert (quality["links"], quality["right"], quality["chain"], quality["wrong"]) == (3, 1, 0, 2)
    assert quality["in_readme"] == 3
    assert quality["missed_pairs"] == ["t02-e01 -> t03-e01", "t04-e01 -> t05-e01"]


def test_a_link_over_a_version_in_between_is_a_chain(tmp_path: Path) -> None:
    quality = link_quality(_Store({"id-1": "id-3"}), _dev_set(tmp_path))
    assert [q["verdict"] for q in quality["listed"]] == ["chain"]
    assert quality["listed"][0]["evidence"] == "id-1 value -> id-3 value"
