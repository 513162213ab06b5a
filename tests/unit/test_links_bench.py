"""bench/recall_changing.py --links: the finder's links judged against the README's table of versions;
--why: each missed question's hits, in /vquery's words."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from bench.recall_changing import ask, link_quality, why


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


def test_why_lists_a_missed_questions_hits_marks_them_and_says_where_its_target_ranks(store: Any) -> None:
    from datetime import datetime

    from ocat.records import Exchange

    def said(prompt: str, day: int) -> Exchange:
        return Exchange(user_prompt=prompt, assistant_response="Noted.", thread_id=f"t{day}", session_id=f"s{day}",
                        timestamp=1_735_700_000.0 + day * 86_400)

    roof, tank, lost = said("The roof quote is 14,200 euros from Telhados Mira.", 1), \
        said("The rainwater tank holds 10,000 litres.", 2), said("Marianne bakes appeltaart on Sundays.", 3)
    store.add_exchanges([roof, tank, lost])
    questions = [{"id": "c1", "question": "what did the roof quote come to?", "facet": "current",
                  "targets": [lost.exchange_id], "superseded": [roof.exchange_id]},
                 {"id": "s1", "question": "how big is the rainwater tank?", "facet": "stable",
                  "targets": [tank.exchange_id]}]
    outcomes = ask(store, questions, datetime(2025, 8, 1))
    assert [o.id for o in outcomes if o.missed] == ["c1"]
    prompts = {e.exchange_id: e.user_prompt for e in (roof, tank, lost)}
    listing = why(store, questions, outcomes, datetime(2025, 8, 1), prompts, top=1).splitlines()
    assert listing[0] == "c1 [current] what did the roof quote come to?"
    assert listing[1].startswith("  1. S* ") and roof.exchange_id[:8] in listing[1] and "(relevant)" in listing[1]
    assert listing[2].startswith(f"  target {lost.exchange_id[:8]} ") and "appeltaart" in listing[2]
    assert listing[-1].startswith("1 of 2 questions missed")
