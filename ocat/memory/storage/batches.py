"""Small helpers for writing and reading Chroma in batches: splitting, de-duplicating, columns."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Iterator, TypeVar, cast

from ocat.errors import StoreError

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection
    from chromadb.api.types import Include

# An id, a text and its metadata, as a write sends them.
Row = tuple[str, str, dict[str, Any]]

_T = TypeVar("_T")


def column(values: Iterable[_T] | None, count: int) -> list[_T | None]:
    """One column of a Chroma result as a list, or `count` Nones when it was not asked for."""
    return list(values) if values is not None else [None] * count


def batches(items: Iterable[_T], size: int) -> Iterator[list[_T]]:
    """`items` in lists of `size` (the last may be shorter), read lazily."""
    batch: list[_T] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def unique_by_id(rows: list[Row]) -> list[Row]:
    """Drop repeated ids within one batch: Chroma rejects a batch with duplicate ids."""
    seen: set[str] = set()
    unique = []
    for row in rows:
        if row[0] not in seen:
            seen.add(row[0])
            unique.append(row)
    return unique


def pages(collection: Collection, include: list[str], page: int) -> Iterator[Any]:
    """A collection read `page` records at a time, with the columns in `include`."""
    offset = 0
    while True:
        try:
            got = collection.get(include=cast("Include", include), limit=page, offset=offset)
        except Exception as exc:
            raise StoreError(f"cannot read the memory store: {exc}") from exc
        yield got
        if len(got["ids"]) < page:
            return
        offset += page
