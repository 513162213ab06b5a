"""The chat model's second look at versions (`memory.consolidate: model`): which earlier exchanges
a new one really updates.

The local finder (ocat.memory.storage.version_finder) links on evidence it can read: a shared subject
word and a value of one type said differently. It is cheap, and it is wrong or silent for about
four links in ten on changing-dev (docs/RETRIEVAL.md, "Facts that change"): "Tiago -> Scalibor" is
two subjects, and "a 10,000 L tank" then "two 3,000 L tanks" shares no word it trusts. A model
reads the two messages as a person would. So, when the setting is on, each exchange a chat
writes is shown to the chat model with the earlier exchanges that may state the same fact (the
finder's own link to it, and the nearest by meaning, a little wider than the finder looks); the
model says which of them it changes, and with which values. Its answer becomes links made by
"model" (certain: the finder never writes over them); a found link the model does not confirm
is undone.

This module is model-free: it makes the question (`check_for`, `messages_for`), reads the
answer (`verdict_of`) and applies it (`apply`). The chat asks the model in the background and
shows what it cost (ocat.chat.consolidation). An answer that cannot be read changes nothing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Sequence

from ocat.memory.storage.version_finder import (
    EXCHANGE_WEIGHT,
    NEIGHBOURS,
    Written,
    newest_before,
    read_records,
    time_of,
)
from ocat.memory.storage.link_records import named_by
from ocat.memory.storage.versions import link_many, unlink

if TYPE_CHECKING:
    from ocat.memory.storage.store import MemoryStore

# How close in meaning an earlier exchange must be to be shown to the model: below the finder's
# 0.50, so the model sees the versions whose words the finder cannot match (the tank plans above
# sit at 0.46), and at most CHECK_CANDIDATES of them, so a check costs a few hundred tokens.
CHECK_SUBJECT = 0.40
CHECK_CANDIDATES = 3
# How much of each message the model reads: a prompt states its facts early; the rest is cost.
PROMPT_CHARACTERS = 700


@dataclass(frozen=True)
class Earlier:
    """An earlier exchange shown to the model: its id, prompt, date, and whether the finder linked it."""

    id: str
    prompt: str
    when: str
    found: bool = False


@dataclass(frozen=True)
class Check:
    """One question for the model: does the new exchange change a fact of these earlier ones?"""

    new_id: str
    prompt: str
    when: str
    earlier: tuple[Earlier, ...]


@dataclass(frozen=True)
class Change:
    """The model's word: earlier exchange `n` (1-based, as shown) states a value the new one changes."""

    n: int
    evidence: str


@dataclass
class Applied:
    """What one check did to the links: made (older ids), undone (found links not confirmed)."""

    linked: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)


def check_for(store: MemoryStore, new_id: str) -> Check | None:
    """The question for the exchange `new_id` just written, or None when no earlier exchange of
    another session is near enough to be a version of one of its facts (then the model is not asked)."""
    got = store.fetch("exchange", [new_id], vectors=True)
    if not got["ids"]:
        return None
    metadata = dict(got["metadatas"][0] or {})
    new = Written(new_id, str(metadata.get("user_prompt") or ""), time_of(metadata),
                  str(metadata.get("session_id") or ""))
    prompt_vector = store.prompts.vectors([new_id]).get(new_id)
    queries = [list(got["embeddings"][0])] + ([list(prompt_vector)] if prompt_vector is not None else [])
    near = store.nearest("exchange", queries, NEIGHBOURS)
    alike: dict[str, float] = {i: EXCHANGE_WEIGHT * max(s, 0.0) for i, s in near[0].items()}
    if prompt_vector is not None:
        for i, s in store.prompts.similarities(list(near[0] | near[-1]), [prompt_vector]).items():
            alike[i] = max(alike.get(i, 0.0), s[0])
    found = set(named_by(store, "exchange", [new_id]))
    known = read_records(store, list(alike) + sorted(found))
    chosen: list[str] = []
    for score, older in sorted(((s, i) for i, s in alike.items()), reverse=True):
        if score < CHECK_SUBJECT or len(chosen) >= CHECK_CANDIDATES:
            break
        record = known.get(older)
        if record is None or older == new_id or record.timestamp >= new.timestamp or record.session == new.session:
            continue
        head = newest_before(store, older, known, {}, new)
        if head is not None and head not in chosen:
            chosen.append(head)
    chosen += [i for i in sorted(found) if i not in chosen and i in known]
    earlier = tuple(Earlier(i, _cut(known[i].prompt), _day(known[i].timestamp), i in found)
                    for i in chosen if known[i].how not in ("model", "user"))
    if not earlier:
        return None
    return Check(new_id, _cut(new.prompt), _day(new.timestamp), earlier)


def messages_for(check: Check) -> list[dict[str, Any]]:
    """The chat messages that ask the model the question; its answer is JSON (`verdict_of`)."""
    shown = "\n".join(f"[{n}] ({e.when}) {e.prompt}" for n, e in enumerate(check.earlier, 1))
    return [
        {"role": "system", "content": (
            "You keep a person's memory of their own chats consistent. Facts change: a dose, a date, a "
            "price, a name, a place, a plan. Answer with JSON only.")},
        {"role": "user", "content": (
            f"New message ({check.when}):\n{check.prompt}\n\nEarlier messages:\n{shown}\n\n"
            "Which earlier messages state a value of a fact that the new message changes, so that the "
            "earlier value no longer holds? Not when the new message repeats the same value, speaks of "
            "another fact, or only discusses a plan.\n"
            'Answer {"updates": [{"n": 1, "old": "the earlier value", "new": "the new value"}]}, '
            'or {"updates": []} when it changes none.')},
    ]


_OBJECT = re.compile(r"\{.*\}", re.S)


def verdict_of(answer: str, shown: int) -> list[Change] | None:
    """The changes the model named, in the order named (each earlier message once, only the ones
    shown), or None when the answer is not the JSON asked for (then nothing is changed)."""
    match = _OBJECT.search(answer or "")
    try:
        data = json.loads(match.group(0)) if match else None
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("updates"), list):
        return None
    changes: dict[int, Change] = {}
    for item in data["updates"]:
        n = item.get("n") if isinstance(item, dict) else item
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= shown or n in changes:
            continue
        old = str(item.get("old") or "").strip() if isinstance(item, dict) else ""
        new = str(item.get("new") or "").strip() if isinstance(item, dict) else ""
        changes[n] = Change(n, f"{old or '(not said)'} -> {new or '(not said)'}"[:200])
    return list(changes.values())


def apply(store: MemoryStore, check: Check, changes: Sequence[Change]) -> Applied:
    """Record the model's verdict: each earlier exchange it named is linked to the new one (how
    "model"), each found link to the new one it did not name is undone. Links a user or the model
    made before are never touched (`check_for` does not show them)."""
    applied = Applied()
    named = {check.earlier[c.n - 1].id: c.evidence for c in changes}
    for older, evidence in named.items():
        if link_many(store, "exchange", [(older, check.new_id, evidence)], "model"):
            applied.linked.append(older)
            applied.evidence.append(evidence)
    for earlier in check.earlier:
        if earlier.found and earlier.id not in named:
            unlink(store, earlier.id)
            applied.dropped.append(earlier.id)
    return applied


def _day(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, tz=timezone.utc).strftime("%Y-%m-%d") if stamp else "undated"


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= PROMPT_CHARACTERS else text[:PROMPT_CHARACTERS].rsplit(" ", 1)[0] + " …"
