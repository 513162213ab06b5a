"""What makes a test slow, written once: it starts a process, runs the real embedding model, or
is the first in its process to import a library the quick loop otherwise never loads.

tests/conftest.py marks a test slow when it asks for a fixture in SLOW_FIXTURES, and fails a
test that is not marked slow but did any of these anyway: that test needs `@pytest.mark.slow`
by hand.
"""

from __future__ import annotations

import platform
import sys
from typing import Any, Sequence

# Fixtures that start processes (`cli` runs `python -m ocat`, `chroma_run` a Chroma server) or run the real model.
SLOW_FIXTURES = frozenset({"cli", "real_embedder", "real_store", "chroma_run", "chroma_server"})

# The audit events raised when a process starts. subprocess and asyncio both go through
# subprocess.Popen; the os functions are the ways around it.
PROCESS_EVENTS = frozenset(
    {"subprocess.Popen", "os.system", "os.posix_spawn", "os.spawn", "os.exec", "os.fork", "os.forkpty"}
)

# Libraries whose import alone costs a quick test seconds of CPU, measured in a fresh process:
# litellm ~5 s (offline), mcp ~1.9 s (its pydantic models), mypy (a test that runs it checks
# code, ~1.7 s). ocat imports each lazily, so no quick test needs them by accident; the one quick
# test that imported litellm was a twelfth of the quick loop's CPU.
HEAVY_IMPORTS = frozenset({"litellm", "mcp", "mypy"})


class SlowWatch:
    """Notes what slow work (a process, the real model, a heavy import) happens while it is on."""

    def __init__(self) -> None:
        self.on = False
        self.seen: list[str] = []

    def install(self) -> None:
        """Listen for process starts (an audit hook) and for the real model's `embed`."""
        from ocat.memory.embedding.embedders import OnnxMiniLMEmbedder

        # openai reads the processor's name, which on Linux runs `uname -p` once per process
        # (then cached): read it first, so no test is charged with that process.
        platform.processor()
        sys.addaudithook(self._audit)
        embed = OnnxMiniLMEmbedder.embed

        def watched_embed(embedder: OnnxMiniLMEmbedder, texts: Sequence[str]) -> list[list[float]]:
            self._note("ran the real embedding model")
            return embed(embedder, texts)

        # The real embedder itself still runs: this only notes that it did.
        setattr(OnnxMiniLMEmbedder, "embed", watched_embed)

    def start(self) -> None:
        """Forget what was seen and watch (at the start of a test)."""
        self.seen = []
        self.on = True

    def stop(self) -> list[str]:
        """Stop watching; what slow work happened meanwhile, once each."""
        self.on = False
        return self.seen

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        # Called for every audit event in the process (opens, imports ...): keep it cheap.
        # "import" is raised only for a module not yet in sys.modules.
        if not self.on:
            return
        if event in PROCESS_EVENTS:
            self._note(f"started a process ({event})")
        elif event == "import" and args[0] in HEAVY_IMPORTS:
            self._note(f"imported {args[0]}")

    @staticmethod
    def heavy_loaded() -> bool:
        """Whether a heavy library is imported already: then a test marked slow for importing it
        found it loaded by an earlier test of its process, and its mark is no less needed."""
        return any(name in sys.modules for name in HEAVY_IMPORTS)

    def _note(self, what: str) -> None:
        if self.on and what not in self.seen:
            self.seen.append(what)
