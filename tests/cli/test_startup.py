"""The import-time rule: the window paints, and `--help`/`--version` answer, before any heavy library loads.

Each check runs in a fresh interpreter, since this test process has imported everything
by now. Wall-clock times are measured in bench/startup.py, never asserted here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import MODEL_DIR

pytestmark = pytest.mark.slow  # every check starts an interpreter

HEAVY = ("litellm", "chromadb", "onnxruntime", "tokenizers", "openai", "tiktoken")
# Not heavy, but not needed for the first frame either (an answer's Markdown, a command's table).
AFTER_FIRST_FRAME = ("markdown_it", "textual.widgets._markdown", "textual.widgets._data_table")

# The real app, headless, with its real memory worker (on an embedded store, to keep it quick).
# On Textual's Ready event, sent once the first frame has been displayed, it notes which heavy
# modules are loaded and whether memory loading has begun; when memory is ready it notes them
# again (so the probe is known to see the modules the worker loads) and quits.
FIRST_PAINT = """
import json, sys
from pathlib import Path
import ocat.ui.app
from ocat.config.loading import load_settings
from ocat.chat.session import ChatSession
from ocat.ui.app import OcatApp

def loaded():
    return [m for m in {heavy!r} if m in sys.modules]

class Probe(OcatApp):
    CSS_PATH = str(Path(ocat.ui.app.__file__).with_name("ocat.tcss"))  # a class made in -c has no file

    def on_ready(self) -> None:
        self.at_first_paint = {{
            "loaded": loaded(),
            "memory_workers": [w.name for w in self.workers if w.group == "memory"],
            "header": str(self.query_one("#header").render()),
        }}
        getattr(super(), "on_ready", lambda: None)()

    def on_memory_view_memory_ready(self, message) -> None:
        # The app's memory component has handled the message; it bubbles up here after.
        print(json.dumps({{**self.at_first_paint, "error": message.loaded.error, "loaded_later": loaded()}}), flush=True)
        self.exit(0)

settings = load_settings(env={{"OCAT_VECTOR_STORE_PATH": {store!r}, "OCAT_EMBEDDING_MODEL_PATH": {model!r}}})
Probe(ChatSession(settings, dummy=True), serve=False).run(headless=True, size=(100, 30))
"""


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=dict(os.environ), timeout=120
    )


def test_no_heavy_library_is_loaded_at_first_paint(tmp_path: Path) -> None:
    run = _python(FIRST_PAINT.format(heavy=HEAVY + AFTER_FIRST_FRAME, store=str(tmp_path / "store"), model=str(MODEL_DIR)), tmp_path)
    assert run.returncode == 0, run.stderr
    probe = json.loads(run.stdout.strip().splitlines()[-1])
    assert "ocat" in probe["header"]  # it really was the chat window that painted
    assert probe["loaded"] == [] and probe["memory_workers"] == []
    # Memory did load, after the first frame, and the probe sees what it imported.
    assert probe["error"] is None and "chromadb" in probe["loaded_later"]


# The command line's own way to the window: everything `ocat` imports before it calls the app's
# run (parsing arguments, reading the config, the store's name), with stdin and stdout taken for a
# terminal; the app's run is replaced by a probe that lists what is loaded and leaves.
CLI_TO_WINDOW = """
import json, sys
sys.stdin.isatty = sys.stdout.isatty = lambda: True
import ocat.ui.app

def probe(self, *args, **kwargs):
    # Memory's door (ocat.memory) may be imported: it loads a room only when one of its names is read.
    loaded = sorted(m for m in sys.modules if m.startswith("ocat.memory.") or m in {heavy!r})
    print("LOADED", json.dumps(loaded), flush=True)
    raise SystemExit(0)

ocat.ui.app.OcatApp.run = probe
sys.argv = ["ocat", "--dummy-mode"]
from ocat.cli.dispatch import main
main()
"""


def test_the_command_line_reaches_the_window_without_memory_or_heavy_libraries(tmp_path: Path) -> None:
    # Memory's modules (and with them chromadb's) load in the app's worker, after the first frame:
    # a name check of `--store` once imported them all before the window (issue 35).
    run = _python(CLI_TO_WINDOW.format(heavy=HEAVY), tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().splitlines()[-1] == "LOADED []"


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_load_neither_textual_nor_heavy_libraries(flag: str, tmp_path: Path) -> None:
    code = (
        "import sys\n"
        f"sys.argv = ['ocat', {flag!r}]\n"
        "from ocat.cli.dispatch import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print('LOADED', [m for m in ('textual', 'prompt_toolkit', 'yaml') + {HEAVY!r} if m in sys.modules])\n"
    )
    run = _python(code, tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().splitlines()[-1] == "LOADED []"
