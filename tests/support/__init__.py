"""What the tests share besides fixtures: the model's place, fakes, the CLI runner, the Pilot
helpers and the model archive server.

tests/conftest.py holds the fixtures and hooks and builds them from these modules; a test file
imports helpers from here, never from conftest.py or from another test file.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODEL_DIR = Path(
    os.environ.get("OCAT_EMBEDDING_MODEL_PATH") or REPO.parent / "shared" / "models" / "all-MiniLM-L6-v2-int8"
)

# Port 9 (discard) has no listener here: a connection to it is refused at once.
CLOSED_URL = "http://127.0.0.1:9/no-downloads-in-tests/onnx.tar.gz"
