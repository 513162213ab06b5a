"""Opening a chat's memory, the one way every face does it, and what to tell the user about it.

The store opens, the embedding model is made ready (downloaded on first use), the exchanges
said meanwhile are written, and the model's session is loaded so the first search does not
wait for it. The full-screen chat runs this in a worker after its first frame; the line mode
and `--ask` run it before their first prompt. Both say the same words (`MemoryLoaded.notice`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable
import threading
import time

import ocat.memory  # the door, read as ocat.memory.X: here `memory` is the session's memory
from ocat.text.terminal import count_of

if TYPE_CHECKING:
    from ocat.memory import DownloadProgress
    from ocat.chat.session_memory import SessionMemory


@dataclass(frozen=True)
class MemoryLoaded:
    """How opening memory went: `error` says why memory is off (None: it is on)."""

    error: str | None
    # Where a first-use download put the model ("Downloaded ... to ~/..."), if one ran.
    downloaded: str | None = None
    # Exchanges said while memory loaded, written to it once it was ready.
    saved: int = 0
    # What became of the exchanges earlier chats kept in a file (ocat.chat.unsaved), in words, if any.
    recovered: str | None = None

    def notice(self, unsaved: int = 0) -> tuple[str, bool] | None:
        """What to tell the user, and whether it is an error; None when there is nothing to say.

        `unsaved` counts the exchanges this chat holds that memory could not take yet.
        """
        if self.error:
            said = "What you say"
            if unsaved:
                said = f"The {count_of(unsaved, 'exchange')} said so far, and what you say next,"
            # Unsaved exchanges are written if memory comes back (the model arrives, or the store
            # opens again on a later turn).
            still = f" {said} stays in this chat and is remembered if memory comes back."
            return f"Memory is off: {self.error}. The chat works without it.{still}", True
        verb = "is" if self.saved == 1 else "are"
        saved = f"; the {count_of(self.saved, 'exchange')} made meanwhile {verb} remembered too" if self.saved else ""
        recovered = f" {self.recovered[:1].upper()}{self.recovered[1:]}" if self.recovered else ""
        if self.downloaded:
            return f"{self.downloaded} Memory is on{saved}.{recovered}", False
        if self.saved:
            return f"Memory is ready{saved}.{recovered}", False
        if recovered:
            return recovered.strip(), False
        return None


class OpeningGate:
    """Whether a session's memory is opening, for a turn that would rather wait for it: the first
    turn's wake block lists the recent threads only once the store is open."""

    def __init__(self, memory: SessionMemory) -> None:
        self._memory = memory
        self._settled = threading.Event()
        self._settled.set()

    def begin(self) -> None:
        """Memory begins to open (or a face is about to open it): `wait` waits until `end`."""
        self._settled.clear()

    def end(self) -> None:
        """Opening memory has ended, however it went."""
        self._settled.set()

    def wait(self, seconds: float) -> bool:
        """Wait, at most `seconds`, for memory to finish opening; True when it is not opening
        (any more). A first download of the model is not waited for: it takes minutes."""
        deadline = time.monotonic() + seconds
        while not self._settled.wait(timeout=0.1):
            if self._memory.model_download is not None or time.monotonic() >= deadline:
                return False
        return True


def load_memory(
    memory: SessionMemory,
    *,
    serve: bool,
    notify: Callable[[str], None] | None = None,
    progress: DownloadProgress | None = None,
) -> MemoryLoaded:
    """Open a session's store and ready its embedding model; never raises for memory's sake.

    `serve`: share the store with other ocat processes while the session lives (the chats);
    `notify` hears what opening waits for (another process holding the store), and that the
    model's cached graph was damaged and made again; `progress`
    follows a first-use download (it may raise Cancelled to stop it).
    """
    memory.opening.begin()
    try:
        return _load(memory, serve=serve, notify=notify, progress=progress)
    finally:
        memory.opening.end()


def _load(
    memory: SessionMemory,
    *,
    serve: bool,
    notify: Callable[[str], None] | None,
    progress: DownloadProgress | None,
) -> MemoryLoaded:
    # A chat embeds every exchange it keeps; a one-shot command (not serving) a handful.
    _load_model_meanwhile(memory, few_texts=not serve, notify=notify)
    if not memory.open(serve=serve, notify=notify):
        return MemoryLoaded(memory.error)
    fetched = memory.ready_model(progress=progress, notify=notify)
    if not memory.model_ready:
        return MemoryLoaded(memory.error)
    if memory.store is not None:
        ocat.memory.catch_up(memory.store)  # what opening left for the model (it may have just arrived)
    saved = memory.save_unsaved()
    recovered = memory.save_unsaved_files()
    downloaded = fetched.describe() if fetched is not None and fetched.downloaded else None
    return MemoryLoaded(memory.error, downloaded=downloaded, saved=saved, recovered=recovered)


def _load_model_meanwhile(memory: SessionMemory, *, few_texts: bool, notify: Callable[[str], None] | None) -> None:
    """Load the local embedding model in a thread while the store opens, when the model is here:
    ONNX Runtime builds its session without Python's lock, so on two cores it costs the start
    nothing (the store's import holds that lock meanwhile). A model still to be fetched is left
    to `ready_model`, which says what it does."""
    if not memory.settings.vector_store.enabled or memory.dummy:
        return
    # Imported here, first: two threads importing numpy (ONNX Runtime's, and ChromaDB's) at once
    # can meet it half made. Only the building of the session runs beside the store's import.
    import onnxruntime  # noqa: F401
    import tokenizers  # noqa: F401

    # Not a daemon: a chat left at once (memory failed to open, the user typed /quit) must wait
    # for the session being built; interpreter shutdown under a daemon thread inside ONNX
    # Runtime aborts the process ("terminate called without an active exception").
    threading.Thread(target=ocat.memory.preload_embedder, args=(memory.settings.embedding,),
                     kwargs={"few_texts": few_texts, "notify": notify},
                     name="ocat-model-load", daemon=False).start()


def warm_up(memory: SessionMemory) -> None:
    """Load the local model's ONNX session now (once memory is on), and measure the store's
    floor if it has none (ocat.memory.retrieval.store_floor): neither is left to the first turn's search."""
    store = memory.store
    if memory.fetched is None or store is None:
        return
    try:
        store.embedder.embed(["warm up"])
        ocat.memory.floor_of(store).shift()
    except Exception:  # a model or store that cannot run is reported by the first turn that needs it
        pass
