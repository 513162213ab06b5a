"""Made-up memory in bulk: words to build texts from, and exchanges as import records or files."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from ocat.records import Exchange

WORDS = (
    "harbour lantern copper meadow violin glacier orchard saddle tunnel walnut quarry ribbon "
    "falcon pepper marble anchor blanket cactus dolphin ember feather garnet hammock igloo"
).split()

ANIMALS = ["otter", "heron", "lynx", "badger", "falcon", "marten", "beaver", "ibis", "gecko", "tapir"]
PLACES = ["harbour", "orchard", "quarry", "glacier", "market", "library", "canyon", "meadow", "bakery", "station"]


def write_exchanges(path: Path, count: int) -> list[Exchange]:
    """Write `count` exchanges (four random WORDS each, 20 to a thread) as an import file."""
    rng = random.Random(7)
    exchanges = []
    with path.open("w", encoding="utf-8") as handle:
        for i in range(count):
            words = " ".join(rng.sample(WORDS, 4))
            exchange = Exchange(
                user_prompt=f"note {i}: {words}",
                assistant_response=f"recorded {words} as item {i}",
                thread_id=f"thread-{i // 20}",
                session_id="session-1",
                exchange_id=f"exchange-{i:05d}",
                timestamp=1_700_000_000 + i,
            )
            exchanges.append(exchange)
            handle.write(json.dumps({"kind": "exchange", **exchange.to_record()}) + "\n")
    return exchanges


def exchange_records(count: int) -> list[dict[str, Any]]:
    """`count` import records, each prompt unlike the others (50 to a thread)."""
    lines = []
    for i in range(count):
        # Short (11 word pieces with its answer, against 21 for a sentence): a test imports 1,200
        # through the real model.
        prompt = f"{ANIMALS[i % 10]} {PLACES[(i // 10) % 10]} {i}"
        lines.append(
            {
                "kind": "exchange", "exchange_id": f"ex-{i:05d}", "thread_id": f"t{i // 50}", "session_id": "s",
                "user_prompt": prompt, "assistant_response": "Noted.", "timestamp": 1000.0 + i,
                "prior_exchange_ids": [], "thread_session_id": f"t{i // 50}_s", "thread_continuation_seq": 0,
            }
        )
    return lines
