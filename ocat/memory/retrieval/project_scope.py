"""The project a memory belongs to, and how a search uses it (docs/memory.md, "Projects").

A project is a folder: an imported agent session's working folder, or, for ocat's own chats,
the git root of the folder ocat was started in (the folder itself outside git). An exchange
without one (every exchange of a store from before projects, a chat's export) is global.

A search can `prefer` a project (the chat's default inside one: its memories are lifted by a
boost, fitted on the dev sets, so a global fact such as "I am vegetarian" still comes), be
`only` about one (`--project PATH`, `/project PATH`: a filter), or ignore projects.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Sequence

ProjectPolicy = Literal["prefer", "only", "off"]
# Metadata key of an exchange's project (ocat.records.PROJECT_KEY).
PROJECT_KEY = "project"
# The lift of a preferred project's exchanges, in z, scaled by the share of the candidates
# outside the project (as the time boost is). Cross-validated by bench/recall_projects.py: 0.1
# on every held-out fold of both dev sets; from 0.2 on, questions whose answer lies outside the
# project lose more than the project's own gain (docs/RETRIEVAL.md, "Projects").
PROJECT_BOOST = 0.1


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

    def where(self) -> dict[str, str] | None:
        """The filter of `only` (None otherwise)."""
        return {PROJECT_KEY: self.project} if self.policy == "only" and self.project else None

    def lift(self, ids: Sequence[str], projects: dict[str, str]) -> tuple[set[str], float]:
        """Which of the candidates `ids` are the project's, and the boost they get: `boost` times
        the share of candidates outside it (a project that holds them all moves nothing)."""
        inside = {i for i in ids if projects.get(i) == self.project}
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
