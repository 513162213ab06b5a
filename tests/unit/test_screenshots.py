"""The README's pictures (docs/screenshots/*.svg) are what the app draws now: docs/screenshots.py
draws them again from the real app and each must be the committed file, byte for byte; and the
README and docs/chat.md show every picture the script draws."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from tests.support import REPO
from tests.support.warm_start import python_command

SCRIPT = REPO / "docs" / "screenshots.py"
PICTURES = REPO / "docs" / "screenshots"
REDRAW = "python docs/screenshots.py"


def script() -> ModuleType:
    """docs/screenshots.py as a module (it is a script, not part of a package)."""
    spec = importlib.util.spec_from_file_location("docs_screenshots", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_and_chat_md_show_every_picture_the_script_draws() -> None:
    drawn = set(script().SCENES)
    assert drawn == {"chat.svg", "memory-browser.svg", "consent.svg"}
    assert {path.name for path in PICTURES.glob("*.svg")} == drawn, f"docs/screenshots/ vs the script: run {REDRAW}"
    readme = set(re.findall(r"\]\(docs/screenshots/([\w.-]+)\)", (REPO / "README.md").read_text(encoding="utf-8")))
    chat = set(re.findall(r"\]\(screenshots/([\w.-]+)\)", (REPO / "docs" / "chat.md").read_text(encoding="utf-8")))
    assert readme == drawn
    assert chat <= drawn and chat


@pytest.mark.slow
def test_the_committed_pictures_are_what_the_app_draws_now(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OCAT_")} | {
        "OCAT_EMBEDDING_MODEL_PATH": os.environ["OCAT_EMBEDDING_MODEL_PATH"]}
    # From the worker's warm interpreter (tests/support/warm_start.py), as `python docs/screenshots.py` runs.
    run = subprocess.run(python_command(str(SCRIPT), "--out", str(tmp_path), env=env), cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    stale = [path.name for path in sorted(tmp_path.glob("*.svg"))
             if path.read_text(encoding="utf-8") != (PICTURES / path.name).read_text(encoding="utf-8")]
    assert stale == [], f"these pictures differ from what the app draws now (new ones in {tmp_path}): run {REDRAW}, look, commit"
    assert {path.name for path in tmp_path.glob("*.svg")} == set(script().SCENES)
