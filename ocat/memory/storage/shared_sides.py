"""The derived vectors a machine shares through a Chroma server: each exchange's prompt vector
and passage vectors, made once by the machine that wrote the exchange, read by every other.

A store on a Chroma server is used from several machines. Each keeps its own prompt vector file
(ocat.memory.storage.prompt_vectors: a turn reads a hundred vectors in a millisecond there), but
none embeds what another already embedded: the writer puts the vectors in the collection
`<store>-sides` beside the exchanges, one record per exchange under the exchange's own id (so a
delete by id takes them too), and a machine that lacks them reads them from there. Its file is
a cache of that collection.

Each record's text is the exchange's vectors as float32 bytes in base64 (the prompt first, then
its passages): a third of the bytes of the JSON numbers Chroma would send for embeddings, and
no float parsing. Its metadata says how many passages it holds (-1: not made yet). Nothing
searches this collection, so its records carry a one-number vector Chroma requires. The
collection records the embedding model that made its vectors: one of another model is neither
read nor written (vectors of two models never mix; each machine embeds for itself instead).
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any, Sequence, cast

from ocat.errors import StoreError

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from chromadb.api.models.Collection import Collection
    from chromadb.api.types import Metadata

    from ocat.memory.embedding.embedders import Embedder

SIDES_SUFFIX = "sides"
# The vector every record here carries: Chroma wants one, and nothing searches by it.
MARK: Sequence[float] = (1.0,)
# Records per request: 256 exchanges' vectors are about 0.5 MB of text at 384 dimensions.
SIDES_BATCH = 256
# The passage count of a record whose passages are still to be made.
NOT_MADE = -1

# One exchange's shared vectors: its prompt's, and its passages' (None: not made yet).
Shared = tuple[list[float], "list[list[float]] | None"]


def _packed(prompt: Sequence[float], passages: Sequence[Sequence[float]]) -> str:
    import numpy as np

    rows = [np.asarray(prompt, dtype=np.float32), *(np.asarray(p, dtype=np.float32) for p in passages)]
    return base64.b64encode(b"".join(row.tobytes() for row in rows)).decode("ascii")


def _unpacked(text: str, dimensions: int, passages: int) -> Shared | None:
    """A record's vectors, or None when its bytes do not hold what its metadata says."""
    import numpy as np

    try:
        flat = np.frombuffer(base64.b64decode(text, validate=True), dtype=np.float32)
    except (ValueError, TypeError):
        return None
    wanted = 1 + max(passages, 0)
    if flat.size != wanted * dimensions:
        return None
    rows = flat.reshape(wanted, dimensions).tolist()
    return rows[0], (rows[1:] if passages >= 0 else None)


class SharedSides:
    """The `<store>-sides` collection of a store on a Chroma server, for one embedding model."""

    def __init__(self, collection: Collection, dimensions: int) -> None:
        self.collection = collection
        self.dimensions = dimensions

    @classmethod
    def open(cls, client: ClientAPI, store: str, embedder: Embedder) -> SharedSides | None:
        """The store's shared vectors (made if missing), or None when they were made by another
        model (this machine then embeds for itself, as before they were shared)."""
        metadata = {"embedding_model": embedder.name, "dimensions": embedder.dimensions}
        try:
            collection = client.get_or_create_collection(f"{store}-{SIDES_SUFFIX}", embedding_function=None,
                                                         metadata=cast("Any", metadata))
        except Exception as exc:
            raise StoreError(f"cannot open the shared vectors of store {store!r}: {exc}") from exc
        recorded = collection.metadata or {}
        if recorded.get("embedding_model") != embedder.name or recorded.get("dimensions") != embedder.dimensions:
            return None
        return cls(collection, embedder.dimensions)

    def put(
        self,
        ids: Sequence[str],
        prompts: Sequence[Sequence[float]],
        passages: Sequence[Sequence[Sequence[float]] | None],
    ) -> None:
        """Share exchanges' vectors (a passage list of None: not made yet); an id already shared
        gets the new ones."""
        for start in range(0, len(ids), SIDES_BATCH):
            part = range(start, min(start + SIDES_BATCH, len(ids)))
            texts = [_packed(prompts[i], passages[i] or []) for i in part]
            counts = [{"passages": NOT_MADE if passages[i] is None else len(passages[i] or [])} for i in part]
            try:
                self.collection.upsert(ids=[ids[i] for i in part], embeddings=cast("Any", [list(MARK)] * len(part)),
                                       documents=texts, metadatas=cast("list[Metadata]", counts))
            except Exception as exc:
                raise StoreError(f"cannot share vectors in the memory store: {exc}") from exc

    def get(self, ids: Sequence[str]) -> dict[str, Shared]:
        """The shared vectors of these exchanges, by id (those not shared, or unreadable, are left out)."""
        found: dict[str, Shared] = {}
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), SIDES_BATCH):
            try:
                got = self.collection.get(ids=unique[start : start + SIDES_BATCH], include=["documents", "metadatas"])
            except Exception as exc:
                raise StoreError(f"cannot read the shared vectors: {exc}") from exc
            for record_id, text, metadata in zip(got["ids"], got["documents"] or [], got["metadatas"] or []):
                count = (metadata or {}).get("passages", NOT_MADE)
                sides = _unpacked(text or "", self.dimensions, int(count) if isinstance(count, int) else NOT_MADE)
                if sides is not None:
                    found[record_id] = sides
        return found

    def delete(self, ids: Sequence[str]) -> None:
        """Forget deleted exchanges' shared vectors (unknown ids are ignored)."""
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), SIDES_BATCH):
            try:
                self.collection.delete(ids=unique[start : start + SIDES_BATCH])
            except Exception as exc:
                raise StoreError(f"cannot delete shared vectors from the memory store: {exc}") from exc
