"""Asking the chat model, in the background, which earlier exchanges a new one updates (`memory.consolidate: model`).

Off by default: each check is a model call the user pays for. When on, every exchange a chat
writes is queued here; one worker thread asks the model the question of
ocat.memory.consolidate and applies its answer, so a turn never waits for it. What the
checks cost (tokens, and dollars where the model's price is known) is added up for the chat and
told to the user with each change of links (`notify`), and in `spent` for the faces. A check that
fails (no network, a busy store, an answer that is not JSON) changes nothing and is not retried:
the finder's own link stays, as with the setting off.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable

from ocat import memory
from ocat.errors import OcatError
from ocat.llm import Message, Usage, stream

if TYPE_CHECKING:
    from ocat.config.loading import LLMSettings
    from ocat.memory import MemoryStore

logger = logging.getLogger(__name__)
# The model answers a question of a few hundred tokens with a line of JSON.
ANSWER_TOKENS = 200

# A judge takes the question's messages and gives the model's answer and what it used.
Judge = Callable[[list[Message]], tuple[str, Usage | None]]


class LinksChecked(str):
    """A check's line for the user, of a type a face tells from memory's other notes (the
    full-screen chat gives it a notice of its own, where a store's wait updates one in place)."""


@dataclass
class Spent:
    """What this chat's checks have cost so far."""

    checks: int = 0
    tokens: int = 0
    cost_usd: float | None = None

    def add(self, usage: Usage | None) -> None:
        """Count one check and what it used."""
        self.checks += 1
        if usage is None:
            return
        self.tokens += usage.total_tokens
        if usage.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + usage.cost_usd

    def words(self) -> str:
        """'3 checks, 1,530 tokens, $0.0003' (no price when the model has none in litellm's table)."""
        price = f", ${self.cost_usd:.4f}" if self.cost_usd is not None else ""
        return f"{self.checks} check{'s' * (self.checks != 1)}, {self.tokens:,} tokens{price}"


def model_judge(settings: LLMSettings) -> Judge:
    """A judge that asks the chat model (the same model, provider and key as the chat), briefly and coolly."""
    asked = replace(settings, temperature=0.0, max_tokens=ANSWER_TOKENS, system_prompt="", system_prompt_files=[])

    async def _answer(messages: list[Message]) -> tuple[str, Usage | None]:
        answer = stream(messages, asked)
        text = "".join([piece async for piece in answer])
        return text, answer.usage

    def judge(messages: list[Message]) -> tuple[str, Usage | None]:
        return asyncio.run(_answer(messages))

    return judge


class Consolidator:
    """One chat's background checks: `submit` an exchange id after it is stored; `close` at the end."""

    def __init__(
        self, store_of: Callable[[], MemoryStore | None], judge: Judge,
        notify: Callable[[str], None] | None = None,
    ) -> None:
        self._store_of = store_of
        self._judge = judge
        self._notify = notify
        self.spent = Spent()
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, exchange_id: str) -> None:
        """Check this stored exchange when the worker gets to it (the worker starts on the first)."""
        with self._lock:
            if self._worker is None:
                self._worker = threading.Thread(target=self._run, name="ocat-consolidate", daemon=True)
                self._worker.start()
        self._queue.put(exchange_id)

    def close(self, timeout: float = 0.0) -> None:
        """Stop after the check under way; waits at most `timeout` seconds (a chat's way out does not
        wait: an unchecked exchange keeps the finder's link)."""
        self._queue.put(None)
        if self._worker is not None:
            self._worker.join(timeout)

    def wait(self, timeout: float | None = None) -> bool:
        """Whether every exchange submitted so far was checked within `timeout` (for tests and batches)."""
        done = threading.Event()

        def drained() -> None:
            self._queue.join()
            done.set()

        threading.Thread(target=drained, daemon=True).start()
        return done.wait(timeout)

    def _run(self) -> None:
        while True:
            exchange_id = self._queue.get()
            try:
                if exchange_id is None:
                    return
                self.check(exchange_id)
            except Exception as exc:  # a check never breaks a chat
                logger.warning("the model's check of %s failed: %s", exchange_id, exc)
            finally:
                self._queue.task_done()

    def check(self, exchange_id: str) -> memory.Applied | None:
        """Ask the model about one stored exchange and apply its answer; what changed, or None when
        nothing was asked or the answer could not be read."""
        store = self._store_of()
        if store is None:
            return None
        try:
            check = memory.check_for(store, exchange_id)
        except OcatError as exc:
            logger.warning("no check of %s: %s", exchange_id, exc)
            return None
        if check is None:
            return None
        answer, usage = self._judge(memory.messages_for(check))
        self.spent.add(usage)
        changes = memory.verdict_of(answer, len(check.earlier))
        if changes is None:
            logger.warning("the model's check of %s was not JSON: %.200s", exchange_id, answer)
            return None
        applied = memory.apply_verdict(store, check, changes)
        if (applied.linked or applied.dropped) and self._notify is not None:
            self._notify(_words(applied, self.spent))
        return applied


def _words(applied: memory.Applied, spent: Spent) -> LinksChecked:
    """What a check changed, in one line, with what this chat's checks cost so far."""
    parts = []
    if applied.linked:
        many = len(applied.linked) != 1
        parts.append(f"it updates {len(applied.linked)} earlier exchange{'s' * many} ({'; '.join(applied.evidence)})")
    if applied.dropped:
        many = len(applied.dropped) != 1
        parts.append(f"{len(applied.dropped)} link{'s' * many} the finder made {'were' if many else 'was'} undone")
    return LinksChecked(f"memory: the model checked the last exchange: {'; '.join(parts)} · "
                        f"this chat's checks: {spent.words()}")
