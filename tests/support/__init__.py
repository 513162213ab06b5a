"""What the tests share besides fixtures: the model's place, fakes, the CLI runner, the Pilot
helpers and the model archive server.

tests/conftest.py holds the fixtures and hooks and builds them from these modules; a test file
imports helpers from here, never from conftest.py or from another test file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

REPO = Path(__file__).resolve().parents[2]


def find_model_dir(environ: Mapping[str, str], repo: Path, home: Path) -> Path:
    """The embedding model the tests run: `OCAT_EMBEDDING_MODEL_PATH`, else the shared folder
    beside the repository (`../shared/models/all-MiniLM-L6-v2-int8`), else where `ocat
    --fetch-model` keeps it (ChromaDB's cache in the home folder), so that a fresh clone tests
    with the model ocat fetched. Read once, before each test gets a home of its own."""
    named = environ.get("OCAT_EMBEDDING_MODEL_PATH")
    if named:
        return Path(named)
    shared = repo.parent / "shared" / "models" / "all-MiniLM-L6-v2-int8"
    fetched = home / ".cache" / "chroma" / "onnx_models" / "all-MiniLM-L6-v2" / "onnx"  # model_files.chroma_model_dir
    for folder in (shared, fetched):
        if (folder / "model.onnx").is_file():
            return folder
    return shared  # neither: the tests that need the model say what to do


MODEL_DIR = find_model_dir(os.environ, REPO, Path.home())

# Port 9 (discard) has no listener here: a connection to it is refused at once.
CLOSED_URL = "http://127.0.0.1:9/no-downloads-in-tests/onnx.tar.gz"
