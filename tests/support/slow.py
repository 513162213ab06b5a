"""What makes a test slow, written once: it starts a process or runs the real embedding model.

tests/conftest.py marks a test slow when it asks for a fixture in SLOW_FIXTURES, and fails a
test that is not marked slow but started a process or ran the model anyway: that test needs
`@pytest.mark.slow` by hand.
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


class SlowWatch:
    """Notes what slow work (a process, the real model) happens while it is on."""

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
        if self.on and event in PROCESS_EVENTS:
            self._note(f"started a process ({event})")

    def _note(self, what: str) -> None:
        if self.on and what not in self.seen:
            self.seen.append(what)
