"""ocat's episodic memory, usable from scripts: open a store from a config, add, search, get, delete.

    from ocat.config import load_settings
    from ocat.memory import open_store, retrieve, RetrievalLimits

    settings = load_settings()
    store = open_store(settings)
    hits = retrieve(store, "what did we decide about X", RetrievalLimits.from_settings(settings.vector_store))

This is the front door: callers import from here. The rooms behind it, lowest first (an
import-linter layers contract keeps the order, docs/ARCHITECTURE.md draws them):

- `embedding/`: the embedders and the local model's files;
- `storage/`: the store (Chroma), its writes and deletes, its derived files (lexical index,
  prompt vectors), thread titles, pins, export and import, reconciling derived data on open;
- `sharing/`: one owner per store folder, its lock, who holds it, the Chroma server child;
- `retrieval/`: ranking, neighbours, the gate with its per-store floor (probed with generic
  questions), filters, a prompt's time range and project, searching several stores;
- `ingest/`: adding texts, files and knowledge folders, finishing an add cut short;
- `opening`, `store_counts`, `store_check`, `named_stores`: what the faces call;
- `store_repair`: `ocat --repair-store`, above them all.

Nothing heavy is imported until a store is opened.
"""

from __future__ import annotations

from ocat.memory.embedding.embedders import Embedder, preload_embedder
from ocat.memory.ingest.documents import add_text, partial_documents
from ocat.memory.ingest.paths import add_path
from ocat.memory.opening import location_for, open_store
from ocat.memory.retrieval.project_scope import PROJECT_BOOST, ProjectScope, describe as describe_scope, project_of
from ocat.memory.retrieval.retrieve import RetrievalLimits, admitted, retrieve
from ocat.memory.retrieval.store_floor import floor_of
from ocat.memory.store_counts import store_stats
from ocat.memory.storage.chroma import StoreLocation
from ocat.memory.storage.derived import DerivedFileError
from ocat.memory.storage.primary import StoreShrunk
from ocat.memory.storage.reconcile import catch_up
from ocat.memory.storage.store import MemoryStore

__all__ = [
    "DerivedFileError",
    "Embedder",
    "MemoryStore",
    "PROJECT_BOOST",
    "ProjectScope",
    "RetrievalLimits",
    "StoreLocation",
    "StoreShrunk",
    "add_path",
    "add_text",
    "admitted",
    "catch_up",
    "describe_scope",
    "floor_of",
    "location_for",
    "open_store",
    "partial_documents",
    "preload_embedder",
    "project_of",
    "retrieve",
    "store_stats",
]
