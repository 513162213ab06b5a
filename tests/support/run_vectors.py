"""The folder where the dev-set tests and the benches' smoke runs keep the real model's vectors
for the whole run (ocat.memory.embedding.vector_cache; docs/development.md, "Vectors kept for a
run"): chats-dev and LoCoMo were embedded again by each of them, in each worker.

It is under the run's base temporary folder, which every xdist worker of the run shares (each
worker's own is a folder in it), so a new run starts with none. Only the tests over the dev sets
keep vectors: a test of the model itself (its batching, its sessions) always runs it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ocat.memory.embedding.vector_cache import use_folder


def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run's folder of kept vectors (made by the first worker that asks, shared by all)."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = root / "kept-vectors"
    folder.mkdir(exist_ok=True)
    return folder


@contextmanager
def vectors_kept_in(folder: Path | None) -> Iterator[Path | None]:
    """Keep this process's vectors in `folder` (None: none) for the time of the block."""
    before = use_folder(folder)
    try:
        yield folder
    finally:
        use_folder(before)
