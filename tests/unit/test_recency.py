"""Asked about now, the newer of the memories found weigh more (ocat.memory.retrieval.recency)."""

from __future__ import annotations

from typing import Any

import pytest

from ocat.memory.retrieval import recency
from ocat.memory.retrieval.neighbours import Candidate
from ocat.memory.retrieval.recency import lift_recent
from ocat.records import Exchange
from tests.support.fakes import SameCalibration as _Same

DAY = 86_400.0


def _records(*days: float) -> dict[str, tuple[str, dict[str, Any]]]:
    return {f"e{n}": ("", {"timestamp": 1_735_700_000.0 + day * DAY}) for n, day in enumerate(days)}


def test_the_newest_is_lifted_most_the_oldest_not_the_rest_by_their_time() -> None:
    records = _records(0, 10, 20)
    ranked = [Candidate("e0", 0.90, 0.90), Candidate("e1", 0.70, 0.70), Candidate("e2", 0.60, 0.60)]
    lifted, rose = lift_recent(ranked, records, _Same(), reach=5, lift=0.2)
    z = {c.id: c.z for c in lifted}
    assert z == pytest.approx({"e0": 0.90, "e1": 0.80, "e2": 0.80})
    assert rose == {"e1", "e2"}
    assert [c.id for c in lifted][0] == "e0"


def test_a_newer_memory_near_the_best_overtakes_an_older_one() -> None:
    records = _records(0, 30, 60)
    ranked = [Candidate("e0", 0.95, 0.95), Candidate("e1", 0.80, 0.80), Candidate("e2", 0.75, 0.75)]
    lifted, _ = lift_recent(ranked, records, _Same(), reach=5, lift=0.15)  # e1 to 0.875, e2 to 0.90
    assert [c.id for c in lifted] == ["e0", "e2", "e1"]


def test_nothing_is_lifted_above_the_best_found() -> None:
    # A question that found nothing worth giving still finds nothing: the gate is above the best.
    records = _records(0, 30)
    ranked = [Candidate("e0", 0.40, 0.40), Candidate("e1", 0.10, 0.10)]
    lifted, _ = lift_recent(ranked, records, _Same(), reach=5, lift=1.0)
    assert max(c.z for c in lifted) == pytest.approx(0.40)
    assert {c.id: c.z for c in lifted}["e1"] == pytest.approx(0.40)


def test_a_lent_score_an_undated_record_or_a_lone_one_is_left_as_it_is() -> None:
    # No time, or one no float holds (another client's metadata), is no time: never a failed search.
    records = _records(0, 30) | {"e9": ("", {}), "e8": ("", {"timestamp": 10**400})}
    neighbour = Candidate("e1", 0.5, 0.2, source="e0")  # ranked by the score its neighbour lends it
    ranked = [Candidate("e0", 0.9, 0.9), neighbour, Candidate("e9", 0.3, 0.3), Candidate("e8", 0.2, 0.2)]
    assert lift_recent(ranked, records, _Same(), reach=5, lift=0.5) == (ranked, set())
    assert lift_recent([Candidate("e0", 0.9, 0.9)], records, _Same(), reach=5, lift=0.5) == ([Candidate("e0", 0.9, 0.9)], set())
    assert lift_recent(ranked[:1] + [Candidate("e1", 0.5, 0.5)], records, _Same(), reach=5, lift=0.0)[1] == set()


def test_only_the_chats_own_count_of_what_it_read_is_lifted() -> None:
    # Records outside what the chat's search read (a longer listing) neither lift nor are lifted,
    # so that listing more never changes what the chat is given.
    records = _records(0, 30)
    ranked = [Candidate("e0", 0.9, 0.9), Candidate("e1", 0.8, 0.8), Candidate("x", 0.7, 0.7)]
    lifted, rose = lift_recent(ranked, records, _Same(), reach=5, lift=0.05)
    assert rose == {"e1"} and {c.id: c.z for c in lifted}["x"] == 0.7
    # Past the chat's count nothing is lifted in: the newest third memory stays third.
    records = _records(0, 10, 20)
    ranked = [Candidate("e0", 0.9, 0.9), Candidate("e1", 0.8, 0.8), Candidate("e2", 0.75, 0.75)]
    lifted, rose = lift_recent(ranked, records, _Same(), reach=2, lift=0.5)
    assert rose == {"e1"} and [c.id for c in lifted] == ["e0", "e1", "e2"]
    assert {c.id: c.z for c in lifted}["e2"] == 0.75


def _exchange(prompt: str, day: float, session: str) -> Exchange:
    return Exchange(user_prompt=prompt, assistant_response="Noted.", thread_id=session, session_id=session,
                    timestamp=1_735_700_000.0 + day * DAY)


def test_a_search_about_now_gives_the_newer_memory_and_says_why(store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from ocat.memory import RetrievalLimits, retrieve
    from ocat.operations.search import hit_record, reasons

    # Two memories of one fact that no link joins: the newer states it in other words.
    old = _exchange("The roof repair quote is 14,200 euros for the whole roof repair.", 0, "s1")
    new = _exchange("Paid the roofer today, 15,480 euros in the end.", 60, "s2")
    store.link_versions = False
    store.add_exchanges([old, new])

    def scores(question: str, lift: float, threshold: float = 0.0) -> dict[str, Any]:
        monkeypatch.setattr(recency, "RECENT_LIFT", lift)
        limits = RetrievalLimits(exchange_results=5, document_results=0, exchange_threshold=threshold,
                                 document_threshold=1.0)
        return {h.id: h for h in retrieve(store, question, limits)}

    for question, about_now in (("what does the roof repair cost now?", True),
                                ("what does the roof repair cost?", False)):
        plain = scores(question, 0.0)
        gate = (plain[old.exchange_id].score + plain[new.exchange_id].score) / 2
        assert plain[new.exchange_id].score < gate < plain[old.exchange_id].score
        found = scores(question, 10.0, gate)
        assert found[old.exchange_id].admitted
        assert found[new.exchange_id].admitted is about_now
        assert found[new.exchange_id].raised_as_newer is about_now
        if about_now:
            listed = list(found.values())
            said = reasons(listed)[listed.index(found[new.exchange_id])]
            assert "newer, asked about now" in said
            assert hit_record(found[new.exchange_id])["raised_as_newer"] is True
        assert "raised_as_newer" not in hit_record(found[old.exchange_id])
