"""The memory tools the chat model may call: search_memory, read_thread, remember.

Each is a face of an operation written once elsewhere (the search of `/vquery`, a thread's
exchanges, the note of `/vadd`), rendered for a model to read: compact text, ids it can pass
back, dates, and the gate's verdict words. Memories the model already has in this turn (the
injected block, the wake block) are marked, not repeated. No tool offered here deletes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ocat.errors import UsageError
from ocat.records import SUPERSEDED_KEY, Exchange, SearchHit
from ocat.text.terminal import count_of, local_time, shorten
from ocat.tools.box import ToolFailed, ToolOutcome, ToolSpec
from ocat import memory
from ocat.operations.lookup import get_record, recent_threads, resolve_thread, short_id
from ocat.operations.search import search
from ocat.text.tokens import estimate_tokens
from ocat.tools.remember_tool import ID_CHARS, REMEMBER_DESCRIPTION, REMEMBER_PARAMETERS, remember

if TYPE_CHECKING:
    from ocat.memory import ProjectScope
    from ocat.memory import MemoryStore
    from ocat.config.settings import Settings

# Results a search gives by default, and at most.
SEARCH_LIMIT, MOST_RESULTS = 5, 20
# Exchanges before and after the one `read_thread` is asked to read around.
AROUND = 3
# Characters per token, to share a result's budget among its entries before counting.
CHARS_PER_TOKEN = 4
# The least of its text a search result shows (the budget's last results get this much).
GLIMPSE = 240
# Tokens of the result budget kept for a search's first line and the box's note.
RESULT_MARGIN = 60
# The years a search's dates may name: no memory is older than the clock's epoch, and a year
# past these would not convert to a time at all (year 1 "failed unexpectedly").
FIRST_YEAR, LAST_YEAR = 1970, 2999
# What a search's `kind` means: which records, and for documents, notes or files.
KINDS = ("any", "exchanges", "notes", "documents")


@dataclass
class MemoryToolContext:
    """What the memory tools of one turn work on: the store, the settings, and the ids the model
    already has (the injected memories and the wake block's pins)."""

    store: MemoryStore
    settings: Settings
    in_context: set[str] = field(default_factory=set)
    # The chat's project scope: its searches prefer (or keep only) that project's exchanges, as recall does.
    project: ProjectScope | None = None
    # Notes `remember` stored this turn (at most `memory.max_notes_per_turn`).
    notes_stored: int = 0

    def shown_id(self, record_id: str) -> str:
        """The id to show for a record: its shortest unique start, as /vget and /vdelete take it
        back (index reads), else the whole id."""
        try:
            return short_id(self.store, record_id)
        except Exception:  # a derived file failing: the whole id still works everywhere
            return record_id


def memory_tools(context: MemoryToolContext) -> list[ToolSpec]:
    """The memory tools for one turn (`remember` only when `memory.model_may_remember`)."""
    tools = [
        ToolSpec("search_memory", SEARCH_DESCRIPTION, SEARCH_PARAMETERS, lambda a: search_memory(context, a)),
        ToolSpec("read_thread", READ_DESCRIPTION, READ_PARAMETERS, lambda a: read_thread(context, a)),
    ]
    if context.settings.memory.model_may_remember:
        tools.append(ToolSpec("remember", REMEMBER_DESCRIPTION, REMEMBER_PARAMETERS, lambda a: remember(context, a)))
    return tools


# -- search_memory ---------------------------------------------------------------------------

SEARCH_DESCRIPTION = (
    "Search the user's memory (past conversations with you, their notes and documents) by meaning "
    "and words, as the user's /vquery does. Use it when the question refers to something said or "
    "saved before that is not already in your context; try other words, or a date range, when the "
    "first search finds nothing useful. Each result has an id (for read_thread), a date, its thread, "
    "a relevance score (0-1) and a verdict."
)
SEARCH_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "What to look for, in words."},
        "after": {"type": "string", "description": "Only memories from this date on (ISO 8601, e.g. 2026-03-01)."},
        "before": {"type": "string", "description": "Only memories before this date (ISO 8601)."},
        "thread": {"type": "string", "description": "Only this thread (its id, or the start of it).",
                   "maxLength": ID_CHARS},
        "kind": {"type": "string", "enum": list(KINDS), "description": "Which memories (default any)."},
        "limit": {"type": "integer", "minimum": 1, "maximum": MOST_RESULTS,
                  "description": f"How many results (default {SEARCH_LIMIT})."},
    },
    "required": ["query"],
    "additionalProperties": False,
}


def search_memory(context: MemoryToolContext, args: dict[str, Any]) -> ToolOutcome:
    """The search of `/vquery`, with dates, a thread and a kind, rendered for the model."""
    query = str(args["query"]).strip()
    if not query:
        raise ToolFailed("query is empty: say what to look for")
    limit = args.get("limit") or SEARCH_LIMIT
    filters, said = _filters(context, args)
    found = search([context.store], query, context.settings.vector_store, count=limit, filters=filters,
                   project=context.project)
    hits = [f.hit for f in found.found]
    if args.get("kind") == "documents":
        hits = [h for h in hits if not h.metadata.get("manual_entry")]
    titles = _thread_titles(context.store, hits)
    ranked = [(f.hit, f.why) for f in found.found if f.hit in hits]
    heads = [_heading(context, n, hit, why, titles) for n, (hit, why) in enumerate(ranked, start=1)]
    where = f" ({said})" if said else ""
    if not hits:
        text = f"No memory matches {query!r}{where}. Try other words, or a wider date range."
    else:
        opening = f"{count_of(len(hits), 'memory', 'memories')} for {query!r}{where}, best first:\n\n"
        text = opening + _fitted_results(context, ranked, heads)
    return ToolOutcome(text=text, summary=f"searched {query!r}{where}: {count_of(len(hits), 'result')}",
                       ids=tuple(h.id for h in hits), count=len(hits))


def _fitted_results(context: MemoryToolContext, ranked: list[tuple[SearchHit, str]], heads: list[str]) -> str:
    """The results' texts within `tools.result_tokens`, best first and greedily: a result takes
    what it needs of the budget, leaving each one after it at least a glimpse, so the best match
    is read whole more often than an equal share allows (bench/tool_recall.py: with equal shares,
    45% of the targets found only by the tool were cut). The characters a token holds vary, so
    the share is measured, and made smaller until every result fits: the box's own bound would
    otherwise cut the last results away whole."""
    budget = context.settings.tools.result_tokens - RESULT_MARGIN
    chars = budget * CHARS_PER_TOKEN
    for _ in range(4):
        entries, left = [], chars
        for n, ((hit, _why), head) in enumerate(zip(ranked, heads), start=1):
            if hit.id in context.in_context:
                entries.append(f"{head} · already in your context above (not repeated)")
                continue
            room = max(GLIMPSE, left - GLIMPSE * (len(ranked) - n) - len(head))
            text = shorten(hit.text, room)
            left -= len(head) + len(text)
            entries.append(f"{head}\n{text}")
        joined = "\n\n".join(entries)
        used = estimate_tokens(joined)
        if used <= budget:
            return joined
        chars = int(chars * budget / used * 0.95)
    return joined  # glimpses alone over the budget: the box cuts the rest, and says so


def _filters(context: MemoryToolContext, args: dict[str, Any]) -> tuple[memory.Filters, str]:
    """The search's filters from its arguments, and how to say them ("after 2026-03-01")."""
    conditions: list[memory.Condition] = []
    said: list[str] = []
    moments: dict[str, datetime] = {}
    for name, op in (("after", "$gte"), ("before", "$lt")):
        if args.get(name):
            moment = moments[name] = _date(name, str(args[name]))
            conditions.append(memory.Condition("date", op, moment.timestamp()))
            said.append(f"{name} {moment.date().isoformat()}")
    if len(moments) == 2 and moments["after"] >= moments["before"]:
        raise ToolFailed(f"after ({moments['after'].date().isoformat()}) must come before before "
                         f"({moments['before'].date().isoformat()}): no memory is in that range")
    if args.get("thread"):
        try:
            thread = resolve_thread(context.store, str(args["thread"]))
        except UsageError as exc:
            raise ToolFailed(str(exc)) from None
        conditions.append(memory.Condition("thread_id", "$eq", thread))
        said.append(f"thread {thread[:8]}")
    kind = args.get("kind") or "any"
    if kind == "notes":
        conditions.append(memory.Condition("manual_entry", "$eq", True))
    if kind != "any":
        said.append(kind)
    chosen = {"exchanges": "exchange", "notes": "document", "documents": "document"}.get(kind)
    return memory.Filters(tuple(conditions), kind=chosen), ", ".join(said)  # type: ignore[arg-type]


def _date(name: str, text: str) -> datetime:
    """An ISO 8601 date (or date and time) as a local moment, within FIRST_YEAR-LAST_YEAR;
    ToolFailed naming the argument and saying the form otherwise."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ToolFailed(f"{name} must be an ISO 8601 date such as 2026-03-01, not {text[:40]!r}") from None
    if not FIRST_YEAR <= moment.year <= LAST_YEAR:
        raise ToolFailed(f"{name} must be a date from {FIRST_YEAR} to {LAST_YEAR}, not {text[:40]!r}")
    return moment if moment.tzinfo is not None else moment.astimezone()


def _thread_titles(store: MemoryStore, hits: list[SearchHit]) -> dict[str, str]:
    threads = sorted({str(h.metadata.get("thread_id")) for h in hits if h.kind == "exchange"})
    if not threads:
        return {}
    try:
        return {t.thread_id: t.title for t in recent_threads(store, len(threads), only=threads)}
    except Exception:  # a derived file failing: the results still come, without their titles
        return {}


def _heading(context: MemoryToolContext, n: int, hit: SearchHit, why: str, titles: dict[str, str]) -> str:
    if hit.kind == "exchange":
        thread = str(hit.metadata.get("thread_id", ""))
        what = f"past exchange · thread {thread[:8]} {titles.get(thread, '')!r}".rstrip()
    else:
        what = hit.origin if not hit.metadata.get("manual_entry") else "note"
    if hit.metadata.get(SUPERSEDED_KEY):
        why = f"replaced by the newer note {context.shown_id(str(hit.metadata[SUPERSEDED_KEY]))}"
    return f"[{n}] id {context.shown_id(hit.id)} · {what} · {hit.when('%Y-%m-%d')} · score {hit.score:.2f} ({why})"


# -- read_thread -----------------------------------------------------------------------------

READ_DESCRIPTION = (
    "Read a past conversation with the user, oldest first: a whole thread (by its id), or the "
    "exchanges around one exchange (give its id as `around`, or as `id`). Ids come from "
    "search_memory's results."
)
READ_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "maxLength": ID_CHARS,
               "description": "A thread's id, or an exchange's id (then its thread), or the start of one."},
        "around": {"type": "string", "maxLength": ID_CHARS,
                   "description": f"An exchange's id: read the {AROUND} before and after it."},
    },
    "required": ["id"],
    "additionalProperties": False,
}


def read_thread(context: MemoryToolContext, args: dict[str, Any]) -> ToolOutcome:
    """A thread's exchanges, or the neighbourhood of one, oldest first, within the budget."""
    store = context.store
    thread, focus = _thread_of(context, str(args["id"]).strip())
    if args.get("around"):
        focus = _exchange_of(context, str(args["around"]).strip())
        thread = focus.thread_id
    exchanges = store.get_thread(thread)
    if not exchanges:
        raise ToolFailed(f"the thread {thread[:8]} holds no exchanges")
    title = _thread_titles(store, [SearchHit(e.exchange_id, "exchange", 0.0, "", e.to_metadata())
                                   for e in exchanges[:1]]).get(thread, "")
    total = len(exchanges)
    if focus is not None:
        at = next((i for i, e in enumerate(exchanges) if e.exchange_id == focus.exchange_id), 0)
        exchanges = exchanges[max(0, at - AROUND) : at + AROUND + 1]
    budget = context.settings.tools.result_tokens * CHARS_PER_TOKEN - 300
    each = max(300, budget // max(1, len(exchanges)))
    entries: list[str] = []
    used = 0
    for exchange in exchanges:
        entry = (f"[{context.shown_id(exchange.exchange_id)}] {_when(exchange)}\n"
                 f"User: {shorten(exchange.user_prompt, each // 3)}\n"
                 f"Assistant: {shorten(exchange.assistant_response, each)}")
        if used + len(entry) > budget and entries:
            break
        entries.append(entry)
        used += len(entry)
    shown = exchanges[: len(entries)]
    left = len(exchanges) - len(shown)
    more = (f"\n\n({left} later exchanges left out to keep within the budget: read_thread with around="
            f"{context.shown_id(exchanges[len(entries)].exchange_id)} reads on)") if left else ""
    part = f"{len(shown)} of its {total} exchanges" if len(shown) < total else count_of(total, "exchange")
    named = f"{thread[:8]} {title!r}" if title else thread[:8]
    return ToolOutcome(text=f"Thread {named}: {part}, oldest first:\n\n" + "\n\n".join(entries) + more,
                       summary=f"read thread {named}: {count_of(len(shown), 'exchange')}",
                       ids=tuple(e.exchange_id for e in shown), count=len(shown))


def _thread_of(context: MemoryToolContext, given: str) -> tuple[str, Exchange | None]:
    """The thread `given` names: a thread id (or its start), or an exchange id (then its thread,
    that exchange being the one to read around)."""
    if not given:
        raise ToolFailed("id is empty: give a thread's id or an exchange's id from search_memory")
    try:
        return resolve_thread(context.store, given), None
    except UsageError as thread_problem:
        try:
            exchange = _exchange_of(context, given)
        except ToolFailed:
            raise ToolFailed(str(thread_problem)) from None
        return exchange.thread_id, exchange


def _exchange_of(context: MemoryToolContext, given: str) -> Exchange:
    try:
        record = get_record(context.store, given)
    except UsageError as exc:
        raise ToolFailed(str(exc)) from None
    if not isinstance(record, Exchange):
        raise ToolFailed(f"{given} is a note or a document, not an exchange of a thread")
    return record


def _when(exchange: Exchange) -> str:
    return local_time(exchange.timestamp, "%Y-%m-%d %H:%M", "undated")
