"""Opening ChromaDB: an embedded store on disk or a Chroma server, behind one interface.

Both clients expose the same collection API, so everything above this module works the
same on either. chromadb is imported here, lazily, and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ocat.errors import StoreError

SCHEMA_VERSION = 1
EXCHANGES_SUFFIX = "exchanges"
DOCUMENTS_SUFFIX = "documents"


@dataclass(frozen=True)
class StoreLocation:
    """Where a store lives: a folder for the embedded client, or a server address (or both:
    a folder whose owning process serves it, reached through that server)."""

    path: Path | None = None
    host: str | None = None
    port: int = 8000

    def describe(self) -> str:
        """The location as a user reads it: a path, `http://host:port`, or a path reached through its owner."""
        if self.host and self.path is not None:
            return f"{self.path} (through its owner at http://{self.host}:{self.port})"
        if self.host:
            return f"http://{self.host}:{self.port}"
        return str(self.path)


def open_client(location: StoreLocation) -> Any:
    """A ChromaDB client for the location, with telemetry off (this machine has no network)."""
    try:
        import chromadb
        from chromadb.config import Settings as ChromaSettings
    except ImportError as exc:  # pragma: no cover - chromadb is a hard dependency
        raise StoreError(f"chromadb is not installed: {exc}") from exc
    chroma_settings = ChromaSettings(anonymized_telemetry=False)
    try:
        if location.host:
            return chromadb.HttpClient(host=location.host, port=location.port, settings=chroma_settings)
        assert location.path is not None
        location.path.mkdir(parents=True, exist_ok=True)
        return chromadb.PersistentClient(path=str(location.path), settings=chroma_settings)
    except Exception as exc:
        raise StoreError(f"cannot open the memory store at {location.describe()}: {exc}") from exc


def collection_names(store: str) -> tuple[str, str]:
    """The two Chroma collections of a named store: exchanges, and documents.

    Separate collections keep counts O(1) and let exchange and document searches run
    without a metadata `where` filter, which is slow at scale.
    """
    return f"{store}-{EXCHANGES_SUFFIX}", f"{store}-{DOCUMENTS_SUFFIX}"


def open_collection(
    client: Any, name: str, *, model: str, dimensions: int, location: str, extra: dict[str, Any] | None = None
) -> Any:
    """Get or create a cosine-space collection and check it was built with this embedding model.

    `extra` metadata (the model's calibration) is recorded only when the collection is created.
    """
    metadata = {"embedding_model": model, "dimensions": dimensions, "ocat_schema": SCHEMA_VERSION, **(extra or {})}
    try:
        collection = client.get_or_create_collection(
            name,
            embedding_function=None,
            metadata=metadata,
            # Chroma's default space is L2; relevance scores here are cosine similarities.
            configuration={"hnsw": {"space": "cosine"}},
        )
    except Exception as exc:
        raise StoreError(f"cannot open collection {name!r} at {location}: {exc}") from exc
    existing = collection.metadata or {}
    stored_model = existing.get("embedding_model")
    stored_dims = existing.get("dimensions")
    if stored_model is not None and (stored_model != model or int(stored_dims or 0) != dimensions):
        raise StoreError(
            f"the store at {location} was built with embedding model {stored_model} ({stored_dims}-d), "
            f"but the config says {model} ({dimensions}-d). Use the store's model, or move the memory "
            "to the new model with --export-memory and --import-memory into a new store."
        )
    space = _space_of(collection)
    if space not in (None, "cosine"):
        raise StoreError(f"collection {name!r} at {location} uses {space} distance; ocat needs cosine")
    return collection


def _space_of(collection: Any) -> str | None:
    configuration = getattr(collection, "configuration_json", None) or {}
    hnsw = configuration.get("hnsw") or {}
    space = hnsw.get("space")
    if space is None:
        space = (collection.metadata or {}).get("hnsw:space")
    return space
