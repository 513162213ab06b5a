"""The project a memory belongs to, and how a search uses it (docs/memory.md, "Projects").

A project is a folder: an imported agent session's working folder, or, for ocat's own chats,
the git root of the folder ocat was started in (the folder itself outside git). An exchange
without one (every exchange of a store from before projects, a chat's export) is global.

A search can `prefer` a project (the chat's default inside one: its memories are lifted by a
boost, fitted on the dev sets, so a global fact such as "I am vegetarian" still comes), be
`only` about one (`--project PATH`, `/project PATH`: a filter), or ignore projects.

An imported session records the folder the agent ran in as it was (a subfolder of the repository,
a path through a link), and so did every store before this rule. So a stored folder is matched,
wherever a search or a list asks, by one rule (`belongs`): its own project (the git root of the
resolved path) when the folder still exists, else a path under the project's (a prefix match on
whole names). A filter names every stored folder that belongs (`stored_projects`: one folder per
thread, read from each thread's first exchange, remembered per store).
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Sequence

from ocat.memory.storage.derived import DerivedFileError

if TYPE_CHECKING:
    from ocat.memory.storage.store import MemoryStore

ProjectPolicy = Literal["prefer", "only", "off"]
# Metadata key of an exchange's project (ocat.records.PROJECT_KEY).
PROJECT_KEY = "project"
# The lift of a preferred project's exchanges, in z, scaled by the share of the candidates
# outside the project (as the time boost is). Cross-validated by bench/recall_projects.py: 0.1
# on every held-out fold of both dev sets; from 0.2 on, questions whose answer lies outside the
# project lose more than the project's own gain (docs/RETRIEVAL.md, "Projects").
PROJECT_BOOST = 0.1
# Thread heads whose metadata is read from Chroma in one call.
_HEADS_READ = 1000


def project_of(folder: str | Path) -> str:
    """The project of `folder`: the nearest enclosing git work tree's root, else the folder itself
    (absolute, `~` expanded, links resolved). A folder that does not exist is taken as it is."""
    path = Path(os.path.abspath(Path(folder).expanduser()))
    try:
        path = path.resolve()
    except OSError:
        return str(path)
    for candidate in (path, *path.parents):
        if (candidate / ".git").exists():
            return str(candidate)
    return str(path)


def belongs(stored: str, project: str | None) -> bool:
    """Whether an exchange recorded in the folder `stored` is of `project` (a project_of): the
    folder's own project when it still exists, else a path at or under the project's."""
    if not stored or not project:
        return False
    if stored == project:
        return True
    if os.path.isdir(stored):
        return project_of(stored) == project
    return stored.startswith(project.rstrip("/\\") + ("\\" if "\\" in project else "/"))


# Per open store: a thread's first exchange id -> the folder it records (read once per head).
_HEAD_FOLDERS: weakref.WeakKeyDictionary[MemoryStore, dict[str, str]] = weakref.WeakKeyDictionary()


def stored_projects(store: MemoryStore) -> set[str]:
    """Every folder the store's exchanges record, read from each thread's first exchange (a
    thread is one session, or one chat): those read before are remembered, so a chat's turns
    read only the threads that are new. Empty when the thread order cannot be read (a damaged
    lexical index: the filter then keeps to the project's own name until it is rebuilt)."""
    try:
        heads = store.threads.heads()
    except DerivedFileError as exc:
        store.derived_failed(exc)
        return set()
    known = _HEAD_FOLDERS.setdefault(store, {})
    unread = [head for head in heads if head not in known]
    for start in range(0, len(unread), _HEADS_READ):
        part = unread[start : start + _HEADS_READ]
        got = store.fetch("exchange", part, vectors=False)
        known.update({head: "" for head in part})  # a head gone since records nothing
        known.update({i: str((m or {}).get(PROJECT_KEY) or "") for i, m in zip(got["ids"], got["metadatas"])})
    return {known[head] for head in heads if known.get(head)}


@dataclass(frozen=True)
class ProjectScope:
    """How one search uses projects: the project, and whether it prefers or keeps only it."""

    project: str | None = None
    policy: ProjectPolicy = "off"
    boost: float = PROJECT_BOOST

    @property
    def preferring(self) -> bool:
        """Whether this search lifts the project's memories."""
        return self.policy == "prefer" and bool(self.project) and self.boost > 0

    def where(self, stored: Iterable[str] = ()) -> dict[str, Any] | None:
        """The filter of `only` (None otherwise): the project, and each of the `stored` folders
        (stored_projects) that belongs to it."""
        if self.policy != "only" or not self.project:
            return None
        folders = sorted({self.project, *(folder for folder in stored if belongs(folder, self.project))})
        return {PROJECT_KEY: folders[0] if len(folders) == 1 else {"$in": folders}}

    def lift(self, ids: Sequence[str], projects: dict[str, str]) -> tuple[set[str], float]:
        """Which of the candidates `ids` are the project's, and the boost they get: `boost` times
        the share of candidates outside it (a project that holds them all moves nothing)."""
        folders = {folder: belongs(folder, self.project) for folder in set(projects.values())}
        inside = {i for i in ids if folders.get(projects.get(i, ""), False)}
        if not ids or not inside:
            return set(), 0.0
        return inside, self.boost * (len(ids) - len(inside)) / len(ids)


def describe(scope: ProjectScope) -> str:
    """The scope in words, as /project shows it."""
    if scope.policy == "only" and scope.project:
        return f"only the exchanges of {scope.project} (and every note and document)"
    if scope.preferring:
        return f"every memory, those of {scope.project} first"
    return "every memory, whatever its project"
