"""ocat's cache files derived from what every test shares (the model's lean graph, litellm's
model table), made once per test worker and linked into each test's own cache folder.

Each test has a cache folder of its own (tests/conftest.py, `isolated_home`), so the first
ocat process of each test that embedded remade the model's lean graph (~0.3 s,
ocat.memory.embedding.lean_graph) and the first that looked a chat model up remade its table
(~0.3 s, ocat.llm.model_table), some 0.3-0.6 s in each of hundreds of tests. ocat only ever
reads those files and replaces them whole (never writes into one), so a test finds what a
user's second run finds. The tests of those caches give themselves an empty cache folder.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from ocat.llm import model_table
from ocat.memory.embedding.lean_cache import session_source

# Read by the warm server (tests/support/warm_server.py, MODEL_VARIABLE): not an OCAT_ variable,
# which ocat would refuse.
WARM_MODEL = "PYTEST_OCAT_WARM_MODEL"
WARM_TOKENIZER = "PYTEST_OCAT_WARM_TOKENIZER"


def make_derived_cache(folder: Path, model_dir: Path) -> Path:
    """Fill `folder` (an XDG cache folder) with what ocat derives from `model_dir` and litellm,
    and name its lean graph and the model's tokenizer to the warm server
    (tests/support/warm_server.py) started later."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(folder))
        lean = session_source(model_dir / "model.onnx")
        model_table._table.cache_clear()  # read again from (and written to) `folder`
        model_table._table()
        model_table._table.cache_clear()  # this process's next look reads the test's own cache
    if isinstance(lean, str):  # a file (not bytes: a cache that cannot be written)
        os.environ[WARM_MODEL] = lean
    os.environ[WARM_TOKENIZER] = str(model_dir / "tokenizer.json")
    return folder


def link_derived_cache(made: Path, cache_home: Path) -> None:
    """Hard-link each file of `made` into `cache_home` at the same place (copied where a link cannot be)."""
    for file in made.rglob("*"):
        if file.is_file():
            target = cache_home / file.relative_to(made)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(file, target)
            except OSError:
                shutil.copy2(file, target)
