"""The records ocat stores and returns: exchanges, document chunks and search hits."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Mapping
from typing import Any, Literal

from ocat.text.terminal import local_time, shorten

RecordKind = Literal["exchange", "document"]
# Every kind of record, in the order the store lists them.
RECORD_KINDS: tuple[RecordKind, ...] = ("exchange", "document")

# The nine metadata fields every stored exchange carries, in the spec's order.
EXCHANGE_FIELDS: tuple[str, ...] = (
    "exchange_id", "thread_id", "session_id", "user_prompt", "assistant_response", "timestamp",
    "prior_exchange_ids", "thread_session_id", "thread_continuation_seq",
)


# The metadata key of an exchange that holds its thread's title (/rename): every exchange of a
# titled thread carries it, so the title lives in the primary store and travels with the thread.
THREAD_TITLE_KEY = "thread_title"
# The metadata key of an exchange's tool calls (ocat.tools): a JSON list, kept and exported.
TOOL_CALLS_KEY = "tool_calls"
# Where an exchange was said, when not in a chat: ONE_SHOT for `ocat --ask` (the wake block
# groups those, so one-shot questions never crowd the conversations out of it).
ORIGIN_KEY = "origin"
ONE_SHOT = "ask"
# Where a coding agent's exchange was said (an imported Claude Code or Codex session): the
# folder it worked in (an absolute path) and the git branch it was on, when known.
PROJECT_KEY = "project"
GIT_BRANCH_KEY = "git_branch"
# Where a forked thread came from (/fork): the thread and the exchange it was forked at. Every
# exchange of the fork carries both (as a title is carried): the link is user data in the primary
# store, exported and imported, and a fork continued later is given that history again.
FORKED_THREAD_KEY = "forked_from_thread"
FORKED_EXCHANGE_KEY = "forked_from_exchange"
# The metadata key of a pinned memory (/pin, /remember): when it was pinned. User data in the
# primary store, like a title: exported, imported, kept through any rebuild of derived files.
PINNED_KEY = "pinned_at"
# The metadata key of a document chunk whose document is kept with fewer chunks than it was
# split into, on purpose: one of its chunks was deleted (`/vdelete doc-KEY-2`), or a repair kept
# a cut-short add whose file is gone. Such a document is whole as it is: never "partial", never
# finished or removed by a repair. Its value says why (SHORTENED_BY_DELETE, SHORTENED_BY_REPAIR).
SHORTENED_KEY = "shortened"
# The metadata key of a note's chunks once a newer note replaced it (the model's `remember` with
# `replaces`): the id of the newer note. The old note is kept, and shown, but retrieval gives
# the newer one, and the wake block shows only the newer one.
SUPERSEDED_KEY = "superseded_by"
# Versions of a fact that changed (docs/memory.md): the OLDER record names the record of its kind
# that may update it, the evidence ("500 mg -> 850 mg") and how the link was made: found by ocat,
# or certain (the model's `remember(replaces=...)`, the user's `/supersede`). User data in Chroma.
UPDATED_BY_KEY, UPDATE_EVIDENCE_KEY, UPDATE_HOW_KEY = "updated_by", "update_evidence", "update_how"
UpdateHow = Literal["found", "model", "user"]
SHORTENED_BY_DELETE = "a chunk was deleted"
SHORTENED_BY_REPAIR = "kept by a repair: its file is gone or changed"


def new_id() -> str:
    """A fresh random UUID string, used for exchange, thread and session ids."""
    return str(uuid.uuid4())


def now() -> float:
    """The current time to the millisecond: short enough to survive any JSON round trip exactly
    (a Chroma server returned full-precision times one unit in the last place off)."""
    return round(time.time(), 3)


# How much of an exchange's text is searched by its words and quoted by a hit: the rest of a
# very long one (a 50 MB pasted log) is kept whole in its metadata, exported and shown whole,
# but indexing it all would take gigabytes (issue 34) and a hit never quotes that much.
SEARCHED_CHARS = 200_000


def searched_text(text: str) -> str:
    """The part of a record's text that is indexed and quoted (its first SEARCHED_CHARS)."""
    return text if len(text) <= SEARCHED_CHARS else text[:SEARCHED_CHARS]


def exchange_text(user_prompt: str, assistant_response: str) -> str:
    """The text an exchange is embedded and searched by."""
    return f"User: {user_prompt}\nAssistant: {assistant_response}"


@dataclass(frozen=True)
class CalledTool:
    """A tool the answer called (ocat.tools), as the exchange keeps it: its name and arguments, how
    many results it gave and their record ids, how long it took, and its error, if any."""

    name: str
    # The arguments as JSON text (compact): what the model asked for.
    arguments: str = "{}"
    count: int | None = None
    ids: tuple[str, ...] = ()
    ms: int | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The call as JSON (in the exchange's metadata, and its export)."""
        try:
            arguments: Any = json.loads(self.arguments)
        except ValueError:
            arguments = self.arguments  # as the model wrote it
        return {"name": self.name, "arguments": arguments, "count": self.count, "ids": list(self.ids),
                "ms": self.ms, "error": self.error}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CalledTool:
        """A call read back from JSON (checked by import; a stored odd value reads as little as it holds)."""
        arguments = data.get("arguments", {})
        count, ms = data.get("count"), data.get("ms")
        return cls(
            name=str(data.get("name", "")),
            arguments=arguments if isinstance(arguments, str) else compact_json(arguments),
            count=count if isinstance(count, int) and not isinstance(count, bool) else None,
            ids=tuple(str(i) for i in data.get("ids") or () if isinstance(i, str)),
            ms=ms if isinstance(ms, int) and not isinstance(ms, bool) else None,
            error=str(data["error"]) if data.get("error") else None,
        )


def compact_json(value: Any) -> str:
    """JSON without spaces (a tool call's arguments, as kept): the same value reads back the same."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def called_tools(value: Any) -> tuple[CalledTool, ...]:
    """An exchange's stored `tool_calls` (a JSON string in Chroma, a list in an export) as
    records; anything else is none."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value else []
        except ValueError:
            return ()
    if not isinstance(value, list):
        return ()
    return tuple(CalledTool.from_json(item) for item in value if isinstance(item, dict))


@dataclass(frozen=True)
class Exchange:
    """One user prompt and the assistant's answer, within a thread and a session."""

    user_prompt: str
    assistant_response: str
    thread_id: str
    session_id: str
    exchange_id: str = field(default_factory=new_id)
    timestamp: float = field(default_factory=now)
    prior_exchange_ids: tuple[str, ...] = ()
    # 0 for the session that started the thread, +1 each time /continue resumes it.
    thread_continuation_seq: int = 0
    # The tools the answer called: kept with it, exported and imported (absent when none).
    tool_calls: tuple[CalledTool, ...] = ()
    # "" for a chat's exchange, ONE_SHOT for `ocat --ask`'s (absent from the metadata when "").
    origin: str = ""
    # An imported coding agent's folder and git branch (absent from the metadata when "").
    project: str = ""
    git_branch: str = ""
    # The thread and exchange this exchange's thread was forked from (/fork), "" for the rest
    # (absent from the metadata then).
    forked_from_thread: str = ""
    forked_from_exchange: str = ""

    @property
    def thread_session_id(self) -> str:
        """`{thread_id}_{session_id}`: the thread as seen within one session."""
        return f"{self.thread_id}_{self.session_id}"

    @property
    def text(self) -> str:
        """The embedded text."""
        return exchange_text(self.user_prompt, self.assistant_response)

    def to_metadata(self) -> dict[str, Any]:
        """Chroma metadata. Chroma rejects empty lists, so prior ids (and tool calls, when there
        are any) are kept as JSON strings."""
        metadata: dict[str, Any] = {
            "exchange_id": self.exchange_id,
            "thread_id": self.thread_id,
            "session_id": self.session_id,
            "user_prompt": self.user_prompt,
            "assistant_response": self.assistant_response,
            "timestamp": float(self.timestamp),
            "prior_exchange_ids": json.dumps(list(self.prior_exchange_ids)),
            "thread_session_id": self.thread_session_id,
            "thread_continuation_seq": int(self.thread_continuation_seq),
        }
        if self.origin:
            metadata[ORIGIN_KEY] = self.origin
        if self.project:
            metadata[PROJECT_KEY] = self.project
        if self.git_branch:
            metadata[GIT_BRANCH_KEY] = self.git_branch
        if self.forked_from_thread:
            metadata[FORKED_THREAD_KEY] = self.forked_from_thread
            metadata[FORKED_EXCHANGE_KEY] = self.forked_from_exchange
        if self.tool_calls:
            metadata[TOOL_CALLS_KEY] = json.dumps([c.to_json() for c in self.tool_calls], ensure_ascii=False)
        return metadata

    def to_record(self) -> dict[str, Any]:
        """The exchange as a JSON-ready dict of the nine fields (prior ids as a list), and its tool
        calls when it has any."""
        record = self.to_metadata()
        record["prior_exchange_ids"] = list(self.prior_exchange_ids)
        if self.tool_calls:
            record[TOOL_CALLS_KEY] = [c.to_json() for c in self.tool_calls]
        return record

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> Exchange:
        """Rebuild an exchange from stored metadata (or from an exported record)."""
        prior = metadata.get("prior_exchange_ids") or []
        if isinstance(prior, str):
            prior = json.loads(prior) if prior else []
        return cls(
            user_prompt=str(metadata["user_prompt"]),
            assistant_response=str(metadata["assistant_response"]),
            thread_id=str(metadata["thread_id"]),
            session_id=str(metadata["session_id"]),
            exchange_id=str(metadata["exchange_id"]),
            timestamp=_stored_time(metadata.get("timestamp")),
            prior_exchange_ids=tuple(str(p) for p in prior),
            thread_continuation_seq=int(metadata.get("thread_continuation_seq", 0)),
            tool_calls=called_tools(metadata.get(TOOL_CALLS_KEY)),
            origin=str(metadata.get(ORIGIN_KEY) or ""),
            project=str(metadata.get(PROJECT_KEY) or ""),
            git_branch=str(metadata.get(GIT_BRANCH_KEY) or ""),
            forked_from_thread=str(metadata.get(FORKED_THREAD_KEY) or ""),
            forked_from_exchange=str(metadata.get(FORKED_EXCHANGE_KEY) or ""),
        )


def made_at(metadata: Mapping[str, Any]) -> float | None:
    """When a record was made, from its metadata: an exchange's `timestamp`, a chunk's
    `date_added`; None when it holds no usable number (a bool, text, an integer too large for a
    float: another client's metadata)."""
    value = metadata.get("timestamp", metadata.get("date_added"))
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:
        return None


def _stored_time(value: Any) -> float:
    """A stored exchange's time, or 0.0 (shown as no date) when it is missing or no number.

    Chroma drops a NaN it is given, so a store filled by an older ocat can hold an exchange
    without a timestamp; reading it must not fail (every export would, with KeyError).
    """
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return 0.0


@dataclass(frozen=True)
class DocumentChunk:
    """A piece of a document or a manual memory, with its metadata."""

    id: str
    text: str
    metadata: dict[str, Any]


# The sources a memory is stored with (ocat.memory.ingest.documents.Source), in words for people:
# every face shows a memory's source through `SearchHit.origin`.
SOURCE_WORDS: dict[str, str] = {
    "vadd_command": "note",
    "remember_command": "note",  # /remember: a note, pinned
    "vdoc_command": "file",
    "cli": "file",
    "chat": "chat",
    "mcp": "MCP",
    "import": "import",
    "model": "model note",
}


def source_word(metadata: Mapping[str, Any]) -> str:
    """A stored memory's `source` in words ("note", "file", "MCP", "import"; a label an MCP
    client gave, as given); a memory stored without one is a note."""
    source = str(metadata.get("source") or "")
    return SOURCE_WORDS.get(source, source or "note")


@dataclass(frozen=True)
class SearchHit:
    """One retrieved memory: what it is, how relevant, and whether it passes the gate."""

    id: str
    kind: RecordKind
    score: float
    text: str
    metadata: dict[str, Any]
    # The relevance threshold this kind of record is compared with.
    threshold: float = 0.0
    # Set by retrieval: the id of the hit this exchange is shown with, as its thread context
    # (the exchange just before or after it, on the same subject); such a hit is never a
    # memory of its own, whatever its score.
    context_of: str | None = None
    # Set by retrieval when the hit reaches the threshold but is far weaker than the best
    # hit of its kind (ocat.memory.retrieval.verdicts): left out, and shown why.
    outranked: bool = False
    # Set by retrieval on a context hit: whether the hit it belongs to is admitted.
    with_admitted: bool = False
    # Listed past the number the chat reads of its kind (an explicit search's --results):
    # ranked as the chat ranks, never given to the model.
    beyond: bool = False
    # Set by retrieval: what the hit is ranked by (its own score, or the higher score a
    # neighbour lends it as context); lists of hits from several searches merge by it.
    rank: float | None = None
    # Set by retrieval when the query named a time ("in March"): how the search used it, in
    # words ("only memories dated 2026-03-01..2026-03-31, from 'in March'"); "" when it named none.
    dated: str = ""
    # Set by retrieval on the newest version of a fact when an older version (this id) is
    # admitted: given to the model with it, whatever its own score, so that an outdated
    # version is never given alone (docs/memory.md, "Facts that change").
    newest_of: str | None = None
    # Set by retrieval on such a newest version when the question asks about the past: the older
    # version is what was asked for, so this one is given after every memory found on its own, in
    # the room they leave, and the older goes without it when it does not fit.
    after_found: bool = False
    # Set by retrieval on an earlier version of a fact when the question asks about the past and a
    # newer version (this id) is admitted: given with it, whatever its own score
    # (ocat.memory.retrieval.follow_versions.with_earlier).
    earlier_of: str | None = None
    # Set by retrieval when this hit stands only because the question asks about the past and a
    # newer version updates it: its `threshold` is the gate eased (ocat.memory.retrieval.follow_versions).
    eased: bool = False
    # Set by retrieval when the question asks about now and this memory was ranked up for being
    # among the newer ones found (ocat.memory.retrieval.recency): its `score` includes the lift.
    raised_as_newer: bool = False

    @property
    def admitted(self) -> bool:
        """True when the memory is shown to the model: on its own, as the newest (or, asked about
        the past, an earlier) version of an admitted hit, or as context of an admitted hit."""
        if (self.newest_of is not None or self.earlier_of is not None) and not self.beyond:
            return True
        if self.context_of is not None:
            return self.with_admitted
        return self.score >= self.threshold and not self.outranked and not self.beyond

    @property
    def order(self) -> tuple[bool, float]:
        """The key lists of hits are sorted by (descending): what the chat reads first, then by rank."""
        return (not self.beyond, self.score if self.rank is None else self.rank)

    @property
    def timestamp(self) -> float | None:
        """When the memory was made (exchange time or the date a document was added)."""
        return made_at(self.metadata)

    def when(self, fmt: str = "%Y-%m-%d", missing: str = "-") -> str:
        """The memory's date in local time, or `missing` when it has none."""
        return local_time(self.timestamp, fmt, missing)

    @property
    def origin(self) -> str:
        """Where a memory came from, for people: its thread (short id), or its file's name, or its
        source in words ("note", "file", "MCP", "import"; a label an MCP client gave, as given)."""
        if self.kind == "exchange":
            return f"thread {str(self.metadata.get('thread_id', ''))[:8]}"
        name = Path(str(self.metadata.get("source_file") or "")).name
        if name:
            return name
        return source_word(self.metadata)

    def excerpt(self, width: int = 160) -> str:
        """The text on one line, cut to width characters."""
        flat = " ".join(self.text.split())
        return shorten(flat, width)


@dataclass(frozen=True)
class AddResult:
    """What adding a text or a document did."""

    source_path: str | None
    added_chunks: int
    total_chunks: int
    replaced_chunks: int = 0
    # The ids of the document's chunks as stored (added now or before).
    ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class StoreStats:
    """Counts and identity of one store."""

    path: str
    collection: str
    exchanges: int
    # Documents (a file, a note: distinct document ids), and the chunks they were split into.
    documents: int
    document_chunks: int
    embedding_model: str
    dimensions: int
    similarity_threshold: float
    # Documents whose add was cut short (a crash, Ctrl+C); adding them again completes them.
    partial_documents: int = 0
    # The local embedding model's folder; None while it is not downloaded (or for a litellm model).
    model_path: str | None = None
    # The store's floor (ocat.memory.retrieval.store_floor): the median best fused score of generic questions,
    # None until measured; and how much more an exchange's fused score must be because of it
    # (ocat.operations.stats words both for people).
    floor: float | None = None
    floor_raise: float = 0.0
