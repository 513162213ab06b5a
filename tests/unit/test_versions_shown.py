"""Versions of a fact as every face shows them: the memory block, search results and their JSON,
`search_memory`, the wake block's pins, `--query-vector-store`, `--check-store`, export and import,
and `--now` (docs/memory.md, "Facts that change")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ocat import memory
from ocat.chat.messages import VERSIONS_NOTE, memory_message
from ocat.config.loading import load_settings
from ocat.memory import MemoryStore
from ocat.operations.search import hit_record, reasons, search
from ocat.records import Exchange, SearchHit, UpdateHow
from tests.support.cli import Cli

JULY_1 = 1751328000.0  # 2025-07-01 00:00 UTC
DAY = 86400.0


def said(store: MemoryStore, prompt: str, answer: str, day: float) -> str:
    exchange = Exchange(user_prompt=prompt, assistant_response=answer, thread_id="t", session_id="s",
                        timestamp=JULY_1 + day * DAY)
    store.add_exchange(exchange)
    return exchange.exchange_id


def hit(store: MemoryStore, record_id: str, **kw: Any) -> SearchHit:
    from ocat.operations.lookup import as_hit

    record = store.get(record_id)
    assert record is not None
    plain = as_hit(record)
    metadata = store.exchanges.get(ids=[record_id], include=["metadatas"])["metadatas"][0]
    return SearchHit(id=plain.id, kind=plain.kind, score=kw.pop("score", 0.8), text=plain.text,
                     metadata=dict(metadata), threshold=kw.pop("threshold", 0.5), **kw)


def versions(store: MemoryStore, old: tuple[str, str], new: tuple[str, str], evidence: str,
             how: UpdateHow = "found") -> tuple[str, str]:
    """Two exchanges ten days apart (prompt, answer), the older linked to the newer."""
    older, newer = said(store, *old, 0), said(store, *new, 10)
    memory.link(store, older, newer, how, evidence)
    return older, newer


def test_the_memory_block_marks_an_outdated_version_and_the_newest_given_with_it(store: MemoryStore) -> None:
    old = said(store, "My metformin dose?", "You take 500 mg.", 0)
    new = said(store, "My metformin dose?", "You take 850 mg now.", 10)
    plain = memory_message([hit(store, old)])
    assert plain is not None and VERSIONS_NOTE not in plain["content"] and "updated-by" not in plain["content"]
    memory.link(store, old, new, "found", "500 mg -> 850 mg")
    block = memory_message([hit(store, old), hit(store, new, score=0.1, newest_of=old)])
    assert block is not None
    content = block["content"]
    assert f'updated-by="{new[:8]}" change="500 mg -&gt; 850 mg"' in content
    assert f'updates="{old[:8]}"' in content and VERSIONS_NOTE in content


def test_a_version_standing_under_the_gate_for_a_question_about_the_past_says_so(store: MemoryStore) -> None:
    old, new = versions(store, ("Who is the roofer?", "Telhados Mira."), ("Who is the roofer now?", "Rui Faria."),
                        "Telhados Mira -> Rui Faria")
    hits = [hit(store, old, score=0.45, threshold=0.40, eased=True), hit(store, new, score=0.1, newest_of=old)]
    why = reasons(hits)
    assert why[0] == (f"earlier version, asked about the past (threshold 0.40); "
                      f"updated by {new[:8]} (Telhados Mira -> Rui Faria)")
    assert hits[0].admitted and why[1] == "the newest version of #1"
    # Asked about the past, the newest version comes after the memories found, and says so.
    later = reasons([hits[0], hit(store, new, score=0.1, newest_of=old, after_found=True)])
    assert later[1] == "the newest version of #1, after the memories found: asked about the past"


def test_an_earlier_version_given_for_a_question_about_the_past_says_so_everywhere(store: MemoryStore) -> None:
    old, new = versions(store, ("Roof quote?", "Telhados Mira quoted €15,800."),
                        ("Roof quote now?", "Rui Faria: €15,100 agreed."), "€15,800 -> €15,100")
    hits = [hit(store, new), hit(store, old, score=0.8, earlier_of=new)]
    block = memory_message(hits)
    assert block is not None and VERSIONS_NOTE in block["content"]
    assert f'updated-by="{new[:8]}"' in block["content"] and f'earlier-of="{new[:8]}"' in block["content"]
    why = reasons(hits)
    assert why == ["relevant", f"an earlier version of #1, asked about the past; updated by {new[:8]} (€15,800 -> €15,100)"]
    record = hit_record(hits[1], why=why[1], compact=True)
    assert record["earlier_of"] == new and record["updated_by"] == new and record["admitted"] is True


def test_search_results_say_the_link_in_words_and_in_json(store: MemoryStore) -> None:
    old, new = versions(store, ("My metformin dose?", "You take 500 mg."), ("My metformin dose?", "You take 850 mg now."),
                        "500 mg -> 850 mg", "user")
    hits = [hit(store, old), hit(store, new, score=0.1, newest_of=old)]
    why = reasons(hits)
    assert why == [f"relevant; updated by {new[:8]} (500 mg -> 850 mg)", "the newest version of #1"]
    first, second = (hit_record(h, why=w, compact=True) for h, w in zip(hits, why))
    assert (first["updated_by"], first["update_evidence"], first["update_how"]) == (new, "500 mg -> 850 mg", "user")
    assert "updated_by" not in first["metadata"]  # said once, as a field
    assert second["updates"] == old and second["admitted"] is True
    # A real search: the outdated version found says so.
    settings = load_settings()
    found = search([store], "metformin dose 500 mg", settings.vector_store)
    by_id = {f.hit.id: f.why for f in found.found}
    assert f"updated by {new[:8]}" in by_id[old]


def test_search_memory_and_the_wake_blocks_pins_say_a_memory_is_outdated(store: MemoryStore) -> None:
    from ocat.operations.wake import build_wake, pin
    from ocat.tools.memory_tools import MemoryToolContext, search_memory

    old = said(store, "Where is the spare key?", "Under the blue flowerpot.", 0)
    new = said(store, "Where is the spare key?", "In the key safe by the door.", 5)
    memory.link(store, old, new, "user", "flowerpot -> key safe")
    settings = load_settings()
    pin(store, old)
    block = build_wake(settings, store)
    assert f"outdated: updated by [{new[:8]}] (flowerpot -> key safe)" in block.text()
    context = MemoryToolContext(store=store, settings=settings)
    outcome = search_memory(context, {"query": "spare key flowerpot"})
    assert f"updated by {new[:8]} (flowerpot -> key safe)" in outcome.text


# -- the command line, in subprocesses -------------------------------------------------------------

AUG_1_NOON = 1754049600.0  # 2025-08-01 12:00 UTC


def exchange_line(exchange_id: str, prompt: str, answer: str, when: float) -> dict[str, Any]:
    return {"kind": "exchange", "exchange_id": exchange_id, "thread_id": f"thread-{exchange_id}",
            "session_id": "s-2025", "user_prompt": prompt, "assistant_response": answer, "timestamp": when,
            "prior_exchange_ids": [], "thread_session_id": f"thread-{exchange_id}_s-2025",
            "thread_continuation_seq": 0}


OLD_DOSE = "e2025-07-dose-500"
NEW_DOSE = "e2025-08-dose-850"
NOTE_KEY = "a" * 32


@pytest.fixture
def dated_store(cli: Cli, tmp_path: Path) -> Path:
    """A store dated 2025, filled by an import: a dose that changed (linked), a walk, and a note
    whose link names a note that was never stored (dangling)."""
    lines = [
        exchange_line(OLD_DOSE, "What is my metformin dose?", "You take 500 mg of metformin a day.",
                      AUG_1_NOON - 12 * 86400),
        exchange_line("e2025-07-walk", "Where did I walk?", "Along the river to the old mill.", AUG_1_NOON - 5 * 86400),
        exchange_line(NEW_DOSE, "The doctor raised my metformin dose.", "Noted: 850 mg of metformin a day now.",
                      AUG_1_NOON),
        {"kind": "document", "id": f"doc-{NOTE_KEY}-0", "text": "The gate code is 1234.",
         "metadata": {"document_id": NOTE_KEY, "chunk_index": 0, "total_chunks": 1, "manual_entry": True,
                      "source": "vadd_command", "date_added": AUG_1_NOON, "updated_by": "b" * 32,
                      "update_evidence": "1234 -> 5678", "update_how": "user"}},
        {"kind": "link", "older": OLD_DOSE, "newer": NEW_DOSE, "how": "found", "evidence": "500 mg -> 850 mg"},
    ]
    path = tmp_path / "dated.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    imported = cli("--import-memory", str(path))
    assert imported.returncode == 0, imported.stderr
    return path


def test_now_reads_time_words_against_the_given_day(cli: Cli, dated_store: Path) -> None:
    asked = cli("--now", "2025-08-02", "--query-vector-store", "what did I say yesterday", "--output", "json")
    assert asked.returncode == 0, asked.stderr
    results = asked.json()["result"]["results"]
    assert results and results[0]["id"] == NEW_DOSE and "2025-08-01" in results[0]["dated"]
    answered = cli("--now", "2025-08-02", "--ask", "what did I say about my metformin dose yesterday?",
                   "--dummy-mode", "--output", "json")
    assert answered.returncode == 0, answered.stderr
    given = {m["id"]: m for m in answered.json()["result"]["memories"]}
    assert NEW_DOSE in given and "2025-08-01" in given[NEW_DOSE]["dated"], given
    # Without it, "yesterday" is the clock's: nothing of 2025 is from then.
    plain = cli("--query-vector-store", "what did I say yesterday", "--output", "json").json()["result"]["results"]
    assert not plain or "2025-08-01" not in plain[0].get("dated", "")
    for bad in ("2025-13-01", "yesterday", "1900-01-01"):
        refused = cli("--now", bad, "--query-vector-store", "dose")
        assert refused.returncode == 2 and "--now" in refused.stderr and "expected a date" in refused.stderr
    elsewhere = cli("--now", "2025-08-02", "--vector-store-stats")
    assert elsewhere.returncode == 2 and "--now applies to --query-vector-store and --ask only" in elsewhere.stderr


def test_query_json_and_text_give_the_link(cli: Cli, dated_store: Path) -> None:
    found = cli("--query-vector-store", "metformin dose 500 mg", "--output", "json").json()["result"]["results"]
    old = next(r for r in found if r["id"] == OLD_DOSE)
    assert (old["updated_by"], old["update_evidence"], old["update_how"]) == (NEW_DOSE, "500 mg -> 850 mg", "found")
    text = cli("--query-vector-store", "metformin dose 500 mg").stdout
    assert f"updated by {NEW_DOSE[:8]} (500 mg -> 850 mg)" in text


@pytest.mark.anyio
async def test_mcp_memory_search_gives_the_link(cli: Cli, dated_store: Path) -> None:
    from tests.cli.test_mcp import call, mcp_session

    async with mcp_session(cli) as session:
        found = await call(session, "search_memory", {"query": "metformin dose 500 mg", "k": 5})
    old = next(r for r in found["results"] if r["id"] == OLD_DOSE)
    assert (old["updated_by"], old["update_evidence"], old["update_how"]) == (NEW_DOSE, "500 mg -> 850 mg", "found")
    assert "updated by" in old["why"]


def test_check_store_counts_links_and_repair_clears_only_the_dangling_one(cli: Cli, dated_store: Path) -> None:
    checked = cli("--check-store")
    assert "links between versions: 1 found, 0 by the model, 1 by you; 1 dangling" in checked.stdout, checked.stdout
    assert checked.returncode != 0
    report = cli("--check-store", "--output", "json").json()["result"]
    assert report["links"]["found"] == 1 and report["links"]["dangling"] == [["document", NOTE_KEY]]
    repaired = cli("--repair-store")
    assert repaired.returncode == 0, repaired.stderr
    assert f"cleared the link of the document {NOTE_KEY}" in repaired.stdout
    after = cli("--check-store")
    assert after.returncode == 0 and "1 found, 0 by the model, 0 by you" in after.stdout and "healthy" in after.stdout
    exported = cli("--export-memory", "-").json_lines()
    assert any(line.get("id") == f"doc-{NOTE_KEY}-0" for line in exported)  # the note itself is kept


def test_links_survive_an_export_and_an_import_into_another_store(cli: Cli, dated_store: Path, tmp_path: Path) -> None:
    cli("--plain", "--dummy-mode", input=f"/supersede e2025-07-walk {OLD_DOSE} not a dose, but for the test\n")
    exported = tmp_path / "out.jsonl"
    assert cli("--export-memory", str(exported)).returncode == 0
    links = [json.loads(line) for line in exported.read_text().splitlines() if '"kind": "link"' in line]
    assert {(k["older"], k["newer"], k["how"]) for k in links} == {(OLD_DOSE, NEW_DOSE, "found"),
                                                                   ("e2025-07-walk", OLD_DOSE, "user")}
    other = {"OCAT_VECTOR_STORE_PATH": str(tmp_path / "other-store")}
    assert cli("--import-memory", str(exported), env=other).returncode == 0
    again = tmp_path / "again.jsonl"
    assert cli("--export-memory", str(again), env=other).returncode == 0
    assert again.read_text() == exported.read_text()  # every link, and the note's in its metadata
    checked = cli("--check-store", env=other).stdout
    assert "1 found, 0 by the model, 2 by you" in checked


def test_supersede_vget_and_unlink_in_line_mode(cli: Cli, dated_store: Path) -> None:
    run = cli("--plain", "--dummy-mode",
              input=f"/unlink {OLD_DOSE}\n/supersede {OLD_DOSE} {NEW_DOSE}\n/vget {NEW_DOSE}\n")
    assert run.returncode == 0, run.stderr
    # Ids as short as the store allows: e2025-07-d, e2025-08.
    assert "e2025-07-d is no longer an outdated version of e2025-08: it is given to the model" in run.stdout
    assert "e2025-07-d is now an outdated version of e2025-08 (500 -> 850)" in run.stdout
    versions = run.stdout.split("**Versions**")[1]
    assert versions.index("`e2025-07-d`") < versions.index("`e2025-08*`") and "2025-07-20" in versions
    assert "-> e2025-08 (user): 500 -> 850" in versions


@pytest.mark.parametrize(("line", "reason"), [
    ({"kind": "link", "older": "a", "newer": "a", "how": "user"}, "are the same memory"),
    ({"kind": "link", "older": "a", "newer": "b", "how": "maybe"}, "how must be one of found, model, user"),
    ({"kind": "link", "older": "", "newer": "b", "how": "user"}, "older must be a non-empty string"),
    ({"kind": "link", "older": "a", "newer": "b", "how": "user", "evidence": 5}, "evidence must be a string"),
    ({"kind": "document", "id": "d", "text": "t", "metadata": {"update_how": "maybe"}}, '"update_how" must be one of'),
    ({"kind": "document", "id": "d", "text": "t", "metadata": {"updated_by": 7}}, '"updated_by" must be a string'),
])
def test_import_refuses_a_link_it_could_not_follow(line: dict[str, Any], reason: str) -> None:
    from ocat.errors import InputFileError
    from ocat.memory import parse_line

    with pytest.raises(InputFileError, match=reason):
        parse_line(json.dumps(line), 3, "memory.jsonl")
