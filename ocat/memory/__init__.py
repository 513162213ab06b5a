"""ocat's episodic memory, usable from scripts: open a store from a config, add, search, get, delete.

    from ocat.config.loading import load_settings
    from ocat.memory import open_store, retrieve, RetrievalLimits

    settings = load_settings()
    store = open_store(settings)
    hits = retrieve(store, "what did we decide about X", RetrievalLimits.from_settings(settings.vector_store))

This is the front door: callers import from here. The rooms behind it, lowest first (an
import-linter layers contract keeps the order, docs/ARCHITECTURE.md draws them):

- `embedding/`: the embedders and the local model's files;
- `storage/`: the store (Chroma), its writes and deletes, its derived files (lexical index,
  prompt vectors), thread titles, pins, links between versions of a fact, export and import,
  reconciling derived data on open;
- `sharing/`: one owner per store folder, its lock, who holds it, the Chroma server child;
- `retrieval/`: ranking, neighbours, the gate with its per-store floor (probed with generic
  questions), filters, a prompt's time range and project, searching several stores;
- `ingest/`: adding texts, files and knowledge folders, finishing an add cut short;
- `opening`, `store_counts`, `store_check`, `store_secrets`, `named_stores`: what the faces call;
- `store_repair`: `ocat --repair-store`, above them all.

Every name the rest of ocat uses is listed below under `TYPE_CHECKING` (what the type checker
reads) and in the door's table (`_EXPORTS`); at run time each is loaded from its room on first
use (PEP 562), so that importing one light room, or this door, does not load them all (the
full-screen chat paints before any of them load). An import-linter contract keeps every other package out of the rooms.
Nothing heavy (chromadb, onnxruntime) is imported until a store is opened.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ocat.memory.embedding.embedders import Embedder, preload_embedder, release_idle_memory
    from ocat.memory.embedding.lean_cache import CacheCheck
    from ocat.memory.embedding.model_files import (
        check_model_graph,
        DownloadProgress,
        FetchResult,
        find_model,
        prepare_model,
        progress_words,
        ProgressPrinter,
        uses_local_model,
    )
    from ocat.memory.ingest.documents import add_text, partial_documents, PartialDocument, Source, throttled_progress
    from ocat.memory.ingest.finishing import finish_document, Finished
    from ocat.memory.ingest.paths import add_path
    from ocat.memory.named_stores import (
        existing_stores,
        missing_store,
        open_stores,
        parse_store_names,
        store_exists,
        store_names,
        with_store,
    )
    from ocat.memory.opening import location_for, open_store
    from ocat.memory.retrieval.across_stores import search_stores, StoreHit
    from ocat.memory.retrieval.filters import Condition, DOCUMENT_KEYS, Filters, FilterSpec, parse_where
    from ocat.memory.retrieval.project_scope import (
        belongs,
        describe as describe_scope,
        PROJECT_BOOST,
        project_of,
        ProjectPolicy,
        ProjectScope,
    )
    from ocat.memory.retrieval.given import admitted, within_budget
    from ocat.memory.retrieval.retrieve import RetrievalLimits, retrieve, retrieve_any
    from ocat.memory.retrieval.store_floor import floor_of, MIN_EXCHANGES
    from ocat.memory.sharing.owner_lock import StoreWait
    from ocat.memory.storage.location import StoreLocation
    from ocat.memory.storage.derived import DerivedFileError
    from ocat.memory.storage.export_import import check_import_file, export_memory, import_memory, TransferResult
    from ocat.memory.storage.export_lines import parse_line
    from ocat.memory.storage.lexical_index import CHUNK_ID
    from ocat.memory.storage.pins import pinned, Pinned, set_pinned
    from ocat.memory.storage.primary import StoreShrunk
    from ocat.memory.storage.reconcile import catch_up, rebuild_derived
    from ocat.memory.storage.redaction import counting_secrets, kept_exchange, SecretsSeen
    from ocat.memory.storage.store import MemoryStore
    from ocat.memory.storage.thread_titles import set_thread_title, titled_threads
    from ocat.memory.storage.link_records import count_links, link_of, linked_keys, LinkCounts, Version
    from ocat.memory.storage.versions import link, link_many, newest, unlink, versions
    from ocat.memory.consolidate import Applied, apply as apply_verdict, check_for, messages_for, verdict_of
    from ocat.memory.storage.writes import replace_exchanges
    from ocat.memory.store_check import check_store, StoreHealth, unopened_health, unreadable_health
    from ocat.memory.store_secrets import redact_store, secrets_in_store, SecretsInStore
    from ocat.memory.store_counts import store_stats
    from ocat.memory.store_repair import repair_store, RepairResult, set_aside_derived


# Each room and the names the door gives of it: the same names as the imports above (what the
# type checker reads; tests/unit/test_memory_door.py keeps the two equal). A table, not those imports,
# so that importing the door loads no room.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "embedding.embedders": ("Embedder", "preload_embedder", "release_idle_memory"),
    "embedding.lean_cache": ("CacheCheck",),
    "embedding.model_files": (
        "check_model_graph",
        "DownloadProgress",
        "FetchResult",
        "find_model",
        "prepare_model",
        "progress_words",
        "ProgressPrinter",
        "uses_local_model",
    ),
    "ingest.documents": ("add_text", "partial_documents", "PartialDocument", "Source", "throttled_progress"),
    "ingest.finishing": ("finish_document", "Finished"),
    "ingest.paths": ("add_path",),
    "named_stores": (
        "existing_stores",
        "missing_store",
        "open_stores",
        "parse_store_names",
        "store_exists",
        "store_names",
        "with_store",
    ),
    "consolidate": ("Applied", "check_for", "messages_for", "verdict_of"),
    "opening": ("location_for", "open_store"),
    "retrieval.across_stores": ("search_stores", "StoreHit"),
    "retrieval.filters": ("Condition", "DOCUMENT_KEYS", "Filters", "FilterSpec", "parse_where"),
    "retrieval.project_scope": ("belongs", "PROJECT_BOOST", "project_of", "ProjectPolicy", "ProjectScope"),
    "retrieval.given": ("admitted", "within_budget"),
    "retrieval.retrieve": ("RetrievalLimits", "retrieve", "retrieve_any"),
    "retrieval.store_floor": ("floor_of", "MIN_EXCHANGES"),
    "sharing.owner_lock": ("StoreWait",),
    "storage.location": ("StoreLocation",),
    "storage.derived": ("DerivedFileError",),
    "storage.export_import": ("check_import_file", "export_memory", "import_memory", "TransferResult"),
    "storage.export_lines": ("parse_line",),
    "storage.lexical_index": ("CHUNK_ID",),
    "storage.pins": ("pinned", "Pinned", "set_pinned"),
    "storage.primary": ("StoreShrunk",),
    "storage.reconcile": ("catch_up", "rebuild_derived"),
    "storage.redaction": ("counting_secrets", "kept_exchange", "SecretsSeen"),
    "storage.store": ("MemoryStore",),
    "storage.thread_titles": ("set_thread_title", "titled_threads"),
    "storage.link_records": ("count_links", "link_of", "linked_keys", "LinkCounts", "Version"),
    "storage.versions": ("link", "link_many", "newest", "unlink", "versions"),
    "storage.writes": ("replace_exchanges",),
    "store_check": ("check_store", "StoreHealth", "unopened_health", "unreadable_health"),
    "store_secrets": ("redact_store", "secrets_in_store", "SecretsInStore"),
    "store_counts": ("store_stats",),
    "store_repair": ("repair_store", "RepairResult", "set_aside_derived"),
}
# Names the door gives under another name than their room's.
_RENAMED = {"describe_scope": ("retrieval.project_scope", "describe"),
            "apply_verdict": ("consolidate", "apply")}
_ROOMS: dict[str, tuple[str, str]] = {
    **{name: (f"ocat.memory.{room}", name) for room, names in _EXPORTS.items() for name in names},
    **{name: (f"ocat.memory.{room}", original) for name, (room, original) in _RENAMED.items()},
}
__all__ = sorted(_ROOMS)


def __getattr__(name: str) -> Any:
    """A front-door name, read from its room (imported the first time). Read each time rather
    than kept here, so the door always gives what the room holds now (a test's stand-in too)."""
    if name not in _ROOMS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _ROOMS[name]
    return getattr(importlib.import_module(module), attribute)


def __dir__() -> list[str]:
    """The front door's names (for completion and `help`)."""
    return sorted({*globals(), *__all__})
