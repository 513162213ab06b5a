"""The link finder compares prompts with prompts: an earlier exchange's passages (made in the
background after a bulk write, inline for a chat's single write) never decide a link, so an
import links as the same chats written one at a time would."""

from __future__ import annotations

from typing import Any

from ocat.memory.storage import version_finder
from ocat.records import Exchange

DAY = 86_400.0


def _exchange(prompt: str, answer: str, day: float, session: str) -> Exchange:
    return Exchange(user_prompt=prompt, assistant_response=answer, thread_id=session, session_id=session,
                    timestamp=1_735_700_000.0 + day * DAY)


def _links_to(store: Any, new: Exchange) -> list[version_finder.Link]:
    row = (new.exchange_id, new.text, new.to_metadata())
    vector, prompt = store.embedder.embed([new.text, new.user_prompt])
    return version_finder.find_links(store, [row], [vector], [prompt])


def test_an_earlier_exchanges_passages_do_not_decide_a_link(store: Any) -> None:
    # Long answers of their own words keep the exchanges apart in meaning as well.
    older = _exchange("Water tank: 5,000 L above the shed?",
                      "Fine for a small garden: polyethylene, shaded, with a mosquito mesh, a first-flush "
                      "diverter, an overflow towards the fig, and a tap at knee height.", 0, "s1")
    newer = _exchange("Pump quotes for the new tank, now 10,000 L buried by Rui Faria Construções?",
                      "Ask each installer about head height, flow per minute, dry-run protection, the "
                      "warranty in writing, who services it, and whether the price includes wiring.", 40, "s2")
    store.link_versions = False
    store.add_exchanges([older])
    prompt_of_newer = store.embedder.embed([newer.user_prompt])[0]
    alike = store.prompts.similarities([older.exchange_id], [prompt_of_newer], passages=False)[older.exchange_id][0]
    assert alike < version_finder.SUBJECT  # the prompts alone are not the same subject
    assert version_finder.changed(older.user_prompt, newer.user_prompt)  # but the values would be a change
    assert _links_to(store, newer) == []
    # A passage of the older exchange's answer as close as can be to the newer prompt changes nothing.
    stored_prompt = store.prompts.vectors([older.exchange_id])[older.exchange_id]
    store.prompts.write([older.exchange_id], [stored_prompt], [[prompt_of_newer]])
    assert store.prompts.similarities([older.exchange_id], [prompt_of_newer])[older.exchange_id][0] > 0.99
    assert _links_to(store, newer) == []
