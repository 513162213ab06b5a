"""The prompt side of an exchange: a second vector per exchange, written, deleted, backfilled
for stores made before it existed, and used by retrieval (ocat.memory.storage.prompt_vectors)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ocat.errors import StoreError
from ocat.memory import MemoryStore, RetrievalLimits, StoreLocation, admitted, retrieve
from ocat.memory.storage.prompt_vectors import PromptVectors
from ocat.memory.storage.scoring import Calibration, calibration_for
from ocat.records import Exchange
from tests.support.fakes import FakeEmbedder

LIMITS = RetrievalLimits(exchange_results=5, document_results=5, exchange_threshold=0.65, document_threshold=0.7)
# The calibration ocat shipped before prompt vectors, as such a store recorded it.
EARLIER = {
    "calibration_cosine_weight": 1.0,
    "calibration_coverage_weight": 1.0,
    "calibration_center": 0.547,
    "calibration_scale": 6.0,
    "calibration_source": "fallback: MiniLM fit",
}


def exchanges(count: int) -> list[Exchange]:
    return [
        Exchange(user_prompt=f"question number {i} about topic{i}", assistant_response=f"answer {i} " * 30,
                 thread_id="t", session_id="s", timestamp=float(i))
        for i in range(count)
    ]


def make_old(store: MemoryStore, metadata: dict[str, Any]) -> None:
    """Turn `store` into one an older ocat made: no prompt vectors, its calibration recorded."""
    store.prompts.delete(list(store.iter_ids("exchange")))
    kept = {k: v for k, v in (store.exchanges.metadata or {}).items() if not k.startswith("calibration_")}
    store.exchanges.modify(metadata={**kept, **metadata})


def reopen(store: MemoryStore, **kwargs: Any) -> MemoryStore:
    return MemoryStore.open(store.location, store.embedder, name=store.name, **kwargs)


def test_every_exchange_gets_its_prompt_vector_and_a_delete_drops_it(store: MemoryStore) -> None:
    added = exchanges(3)
    store.add_exchanges(added)
    assert store.prompts.count() == 3
    [vector] = store.embedder.embed([added[1].user_prompt])
    got = store.prompts.similarities([added[1].exchange_id], [vector])
    assert got[added[1].exchange_id][0] == pytest.approx(1.0, abs=1e-5)  # the prompt alone, not the exchange
    assert store.delete([added[1].exchange_id]) == 1
    assert store.prompts.count() == 2
    assert store.prompts.similarities([added[1].exchange_id], [vector]) == {}


def test_a_store_made_before_prompt_vectors_is_backfilled_and_its_calibration_upgraded(store: MemoryStore) -> None:
    store.add_exchanges(exchanges(5))
    make_old(store, EARLIER)
    told: list[str] = []
    again = reopen(store, notify=told.append)
    assert again.prompts.count() == 5
    assert again.calibration == calibration_for(store.embedder.name) and again.calibration.prompt_side
    # Recorded, so the next open (and another process) uses it without asking again.
    assert Calibration.from_metadata(again.exchanges.metadata or {}) == again.calibration
    assert again.exchanges.metadata["embedding_model"] == store.embedder.name
    assert told == []  # five prompts are a moment's work: not announced


def test_a_long_backfill_is_announced(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ocat.memory.storage.reconcile.ANNOUNCE_BACKFILL", 4)
    store.add_exchanges(exchanges(5))
    make_old(store, EARLIER)
    told: list[str] = []
    reopen(store, notify=told.append)
    assert told == ["embedding the prompts of 5 earlier exchanges (once, for the memory gate)…"]


def test_a_calibration_the_user_fitted_is_kept_and_scores_without_the_prompt_side(store: MemoryStore) -> None:
    store.add_exchanges(exchanges(3))
    own = {**EARLIER, "calibration_center": 0.6, "calibration_source": "my own fit"}
    make_old(store, own)
    again = reopen(store)
    assert again.calibration == Calibration(1.0, 1.0, 0.6, 6.0, "my own fit", prompt_side=False)
    assert again.prompts.count() == 3  # written all the same: cheap, and ready for a refit


def test_a_failed_backfill_opens_the_store_with_its_old_calibration(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.add_exchanges(exchanges(3))
    make_old(store, EARLIER)

    def fail(*_: Any, **__: Any) -> None:
        raise StoreError("cannot write the prompt vectors: disk full")

    monkeypatch.setattr(PromptVectors, "write", fail)
    again = reopen(store)
    assert again.calibration.center == 0.547 and not again.calibration.prompt_side
    assert again.exchanges.metadata["calibration_center"] == 0.547
    assert len(retrieve(again, "question number 1", LIMITS)) == 3  # memory still works


def test_prompt_vectors_of_exchanges_gone_are_dropped_on_open(store: MemoryStore) -> None:
    added = exchanges(3)
    store.add_exchanges(added)
    store.exchanges.delete(ids=[added[0].exchange_id])  # as an older client deleting from a server would
    store.lexical.delete("exchange", [added[0].exchange_id])
    again = reopen(store)
    assert again.prompts.count() == 2


def test_an_exchange_without_a_prompt_vector_scores_by_its_own(store: MemoryStore) -> None:
    added = exchanges(3)
    store.add_exchanges(added)
    store.prompts.delete([added[2].exchange_id])  # as if another client wrote it a moment ago
    hits = retrieve(store, added[2].user_prompt, LIMITS)
    assert hits[0].id == added[2].exchange_id


# -- with the real model ------------------------------------------------------------------------

# A short question under a long answer that wanders: the exchange's vector is mostly the answer.
ASKED = "what should I name my new sourdough starter?"
WANDERING = (
    "Fun idea! Many bakers pick punny names: Clint Yeastwood, Bread Pitt, Doughlene or Sir Loaf-a-lot. "
    "Whatever you choose, feed it at the same time each day with equal weights of flour and water, keep "
    "it somewhere warm, around 24 degrees, and discard half before each feeding. After a week it should "
    "double within six hours of a feed; that is when it is ready to raise a loaf. Rye flour speeds it up, "
    "and a loose lid lets gases escape. If a grey liquid collects on top it is hungry: stir it in or pour "
    "it off, and feed it more often. In the fridge it keeps for a week or two between feeds."
)


def test_the_prompt_side_finds_a_question_asked_again_under_a_long_answer(tmp_path: Path, real_embedder: Any) -> None:
    with_prompts = MemoryStore.open(StoreLocation(path=tmp_path / "new"), real_embedder, name="test")
    without = MemoryStore.open(StoreLocation(path=tmp_path / "old"), real_embedder, name="test")
    for target in (with_prompts, without):
        target.add_exchanges([Exchange(user_prompt=ASKED, assistant_response=WANDERING, thread_id="t", session_id="s")])
    # The same fit without the prompt side (a fit of the user's own is kept as recorded).
    make_old(without, {**EARLIER, "calibration_center": calibration_for(real_embedder.name).center,
                       "calibration_source": "my own fit"})
    without = reopen(without)
    assert with_prompts.calibration.center == without.calibration.center
    assert with_prompts.calibration.prompt_side and not without.calibration.prompt_side
    question = "what was that name idea for my sourdough starter again?"
    query = real_embedder.embed([question])
    [(_, whole)] = with_prompts.nearest("exchange", query, 1)[0].items()
    [prompt] = real_embedder.embed([ASKED])
    assert sum(a * b for a, b in zip(prompt, query[0])) > whole + 0.1  # the prompt alone is much nearer
    [new] = retrieve(with_prompts, question, LIMITS)
    [old] = retrieve(without, question, LIMITS)
    assert new.score > old.score  # the same fit: only the prompt side differs
    assert admitted([new])


def test_new_stores_use_the_prompt_side_fit(real_store: MemoryStore) -> None:
    assert real_store.calibration == calibration_for(real_store.embedder.name)
    assert real_store.calibration.prompt_side and real_store.calibration.center == pytest.approx(0.597)
    assert calibration_for("a-model-without-a-fit").prompt_side  # the fallback borrows the same fit


def test_prompt_vectors_of_another_model_are_dropped_and_embedded_again(store: MemoryStore) -> None:
    store.add_exchanges(exchanges(2))
    other = FakeEmbedder(name="another-model", dimensions=64)
    again = PromptVectors(store.prompts.path, other)  # a cache file outliving its collection
    assert again.count() == 0
    assert PromptVectors(store.prompts.path, store.embedder).count() == 0  # and the same back


def test_prompt_vectors_sit_beside_the_lexical_index(store: MemoryStore) -> None:
    assert Path(store.prompts.path).name == "ocat-prompts-test.sqlite3"
    assert Path(store.prompts.path).parent == Path(store.lexical.path).parent


@pytest.mark.anyio
async def test_the_chat_says_while_it_embeds_an_old_stores_prompts_and_clears_it_after(
    tmp_path: Path, real_embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from tests.support.pilot import make_app, notices, wait_for
    from ocat.ui.memory_view import MemoryState, MemoryStatus

    old = MemoryStore.open(StoreLocation(path=tmp_path / "old"), real_embedder, name="default")
    old.add_exchanges(exchanges(3))
    make_old(old, {**EARLIER, "calibration_source": "locomo-dev fit"})
    monkeypatch.setattr("ocat.memory.storage.reconcile.ANNOUNCE_BACKFILL", 2)
    seen = threading.Event()
    real_write = PromptVectors.write

    def write(self: PromptVectors, ids: Any, vectors: Any, *passages: Any) -> None:
        seen.wait(30)  # hold the upgrade until the test has looked at the screen
        real_write(self, ids, vectors, *passages)

    monkeypatch.setattr(PromptVectors, "write", write)
    app = make_app(dummy=True, **{"vector_store.path": str(tmp_path / "old")})
    async with app.run_test(size=(100, 30)) as pilot:
        said = "embedding the prompts of 3 earlier exchanges (once, for the memory gate)…"
        await wait_for(pilot, lambda: said in notices(app), "the upgrade is said", seconds=30)
        assert app.memory_view.state is MemoryState.LOADING  # work under way, not a wait for another process
        seen.set()
        await wait_for(pilot, lambda: app.memory_view.status == MemoryStatus(MemoryState.READY, exchanges=3), "memory ready", seconds=30)
        await pilot.pause()
        assert said not in notices(app)
    assert app.session.session_memory.store is None or app.session.session_memory.store.calibration.prompt_side
