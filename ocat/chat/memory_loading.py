"""Opening a chat's memory, the one way every face does it, and what to tell the user about it.

The store opens, the embedding model is made ready (downloaded on first use), the exchanges
said meanwhile are written, and the model's session is loaded so the first search does not
wait for it. The full-screen chat runs this in a worker after its first frame; the line mode
and `--ask` run it before their first prompt. Both say the same words (`MemoryLoaded.notice`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable
import threading

from ocat import memory
from ocat.chat.outcomes import MemoryLoaded

if TYPE_CHECKING:
    from ocat.memory import DownloadProgress
    from ocat.chat.session_memory import SessionMemory


def load_memory(
    session_memory: SessionMemory,
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
    session_memory.opening.begin()
    try:
        return _load(session_memory, serve=serve, notify=notify, progress=progress)
    finally:
        session_memory.opening.end()


def _load(
    session_memory: SessionMemory,
    *,
    serve: bool,
    notify: Callable[[str], None] | None,
    progress: DownloadProgress | None,
) -> MemoryLoaded:
    # A chat embeds every exchange it keeps; a one-shot command (not serving) a handful.
    _load_model_meanwhile(session_memory, few_texts=not serve, notify=notify)
    if not session_memory.open(serve=serve, notify=notify):
        return MemoryLoaded(session_memory.error)
    fetched = session_memory.ready_model(progress=progress, notify=notify)
    if not session_memory.model_ready:
        return MemoryLoaded(session_memory.error)
    if session_memory.store is not None:
        memory.catch_up(session_memory.store)  # what opening left for the model (it may have just arrived)
    saved = session_memory.save_unsaved()
    recovered = session_memory.save_unsaved_files()
    downloaded = fetched.describe() if fetched is not None and fetched.downloaded else None
    return MemoryLoaded(session_memory.error, downloaded=downloaded, saved=saved, recovered=recovered)


def _load_model_meanwhile(
    session_memory: SessionMemory, *, few_texts: bool, notify: Callable[[str], None] | None
) -> None:
    """Load the local embedding model in a thread while the store opens, when the model is here:
    ONNX Runtime builds its session without Python's lock, so on two cores it costs the start
    nothing (the store's import holds that lock meanwhile). A model still to be fetched is left
    to `ready_model`, which says what it does."""
    if not session_memory.settings.vector_store.enabled or session_memory.dummy:
        return
    # Imported here, first: two threads importing numpy (ONNX Runtime's, and ChromaDB's) at once
    # can meet it half made. Only the building of the session runs beside the store's import.
    import onnxruntime  # noqa: F401
    import tokenizers  # noqa: F401

    # Not a daemon: a chat left at once (memory failed to open, the user typed /quit) must wait
    # for the session being built; interpreter shutdown under a daemon thread inside ONNX
    # Runtime aborts the process ("terminate called without an active exception").
    threading.Thread(target=memory.preload_embedder, args=(session_memory.settings.embedding,),
                     kwargs={"few_texts": few_texts, "notify": notify},
                     name="ocat-model-load", daemon=False).start()


def warm_memory(session_memory: SessionMemory) -> None:
    """Load the local model's ONNX session now (once memory is on), and measure the store's
    floor if it has none (ocat.memory.retrieval.store_floor): neither is left to the first turn's search."""
    store = session_memory.store
    if session_memory.fetched is None or store is None:
        return
    try:
        store.embedder.embed(["warm up"])
        memory.floor_of(store).shift()
    except Exception:  # a model or store that cannot run is reported by the first turn that needs it
        pass
    # Building the model's session freed what its optimiser folded (~60 MB the C heap keeps):
    # the chat now waits for its first prompt (docs/PERFORMANCE.md, "Idle memory").
    session_memory.release_idle(wait=True)
