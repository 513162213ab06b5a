"""Text embedders: the local ONNX MiniLM model (default) and any litellm embedding model.

Heavy libraries (onnxruntime, tokenizers, numpy; litellm through ocat.llm.litellm_offline) are imported
when an embedder is first used, never at module import, so opening the CLI stays fast.
"""

from __future__ import annotations

import ctypes
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

from ocat.errors import ConfigError, EmbeddingError
from ocat.memory.embedding.model_files import ensure_model, find_model, LOCAL_MODEL_NAME
from ocat.llm.litellm_offline import embed
from ocat.memory.embedding.lean_cache import is_cached_graph, remake, session_source
from ocat.memory.embedding.vector_cache import kept_in, VectorCache

if TYPE_CHECKING:
    from ocat.config.loading import EmbeddingSettings

LOCAL_MODEL_DIMENSIONS = 384
# all-MiniLM-L6-v2 was trained on sequences of at most 256 word pieces; longer input is cut.
MAX_TOKENS = 256
# Texts are embedded in batches of similar length (so padding stays small) of at most
# BATCH_SIZE texts and BATCH_TOKENS tokens, padding included. Attention grows with the
# square of the length, and on a 2-core CPU batches of 32 long texts were both slower
# (24 against 30 chunks/s for 1,000-character chunks) and far bigger (1 GB against 0.4 GB)
# than batches of a few (docs/PERFORMANCE.md). 512 tokens (two full windows) took no more
# CPU than 1024 and held 50-130 MB less at the peak of an import (docs/PERFORMANCE.md).
BATCH_SIZE = 32
BATCH_TOKENS = 512
# Texts sent to a litellm embedding model per request.
LITELLM_BATCH = 256
# Words (runs of non-space) of a text a litellm embedding model is sent: providers refuse
# input past their window (OpenAI's is 8,191 tokens) rather than cut it, and 4,000 words
# stay within it for prose; the rest of the text was never going to count.
LITELLM_MAX_WORDS = 4000
_WORD = re.compile(r"\S+")
# Passages (the windows a long text has past the model's first): at most this many per text,
# each overlapping the one before by PASSAGE_OVERLAP word pieces, so a sentence cut by one
# window's edge is whole in the next. 6 windows reach about 1,300 word pieces (about 1,000
# words): past that a text is a document, and belongs in /vdoc's chunks.
MAX_PASSAGES = 6
PASSAGE_OVERLAP = 32
# The shortest last passage, in word pieces (docs/RETRIEVAL.md: the bare tail past the window
# and a whole window ending with the text were tried; 128 kept the gate's quiet and the late facts).
MIN_PASSAGE = 128


# The longest word the tokenizer reads as words: a longer one is one [UNK] word piece
# (WordPiece's max_input_chars_per_word), so `count` words never need more than this per word.
MAX_WORD_CHARS = 100


def leading_words(text: str, count: int) -> str:
    """`text` up to the end of its `count`-th word (whole when shorter): what a model that
    reads a bounded window can use of it. Reads only that far, and never past `count` words of
    the longest length the tokenizer reads, so a 50 MB text (even one without a space) costs no
    more than a short one (the tokenizer would otherwise split all of it before cutting)."""
    text = text[: count * MAX_WORD_CHARS]
    for seen, word in enumerate(_WORD.finditer(text), start=1):
        if seen == count:
            return text[: word.end()]
    return text


class Embedder(Protocol):
    """Anything that turns texts into unit-length vectors of a fixed dimension."""

    name: str
    dimensions: int

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts, returning one L2-normalised vector per text, in order."""
        ...


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 run with onnxruntime: mean pooling, L2 normalisation, dynamic padding."""

    def __init__(
        self,
        model_dir: Path | Callable[[], Path],
        *,
        threads: int | None = None,
        present: Callable[[], bool] | None = None,
    ) -> None:
        """`model_dir` is the model's folder, or a function that finds (or fetches) it on first use,
        so that a store opens, counts and exports without the model; `present` tells, without
        fetching anything, whether the model is on this machine (default: its folder holds it)."""
        self.name = LOCAL_MODEL_NAME
        self.dimensions = LOCAL_MODEL_DIMENSIONS
        self._locate = model_dir if callable(model_dir) else (lambda: model_dir)
        self._present = present or (lambda: (self._locate() / "model.onnx").is_file())
        self._threads = threads
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._made_by: tuple[Path, bool] | None = None  # the model's folder and session kind, once loaded

    def load(self, *, few_texts: bool = False, notify: Callable[[str], None] | None = None) -> None:
        """Load the model's session and tokenizer now (else on the first embedding).

        `few_texts`: a session for a process that embeds a handful of texts (a one-shot
        `--ask`): its weights are scaled at each run instead of once when it loads, which makes
        it ~70 MiB smaller and ~150 ms quicker to load, and each run ~8 ms slower (too slow for
        an import's thousands of batches). Its vectors differ from the other session's by at
        most ~2e-7 in any component (docs/PERFORMANCE.md). `notify` hears one line when the
        model's cached graph was damaged and made again (ocat.memory.embedding.lean_cache)."""
        self._load(few_texts=few_texts, notify=notify)

    def _load(self, *, few_texts: bool = False, notify: Callable[[str], None] | None = None) -> None:
        with self._lock:
            if self._session is not None:
                return
            try:
                import onnxruntime
            except ImportError as exc:  # pragma: no cover - a hard dependency (tokenizers too: tokenizer_of)
                raise EmbeddingError(f"cannot load the local embedding model: {exc}") from exc
            model_dir = self._locate()
            try:
                tokenizer = tokenizer_of(model_dir / "tokenizer.json")
                options = onnxruntime.SessionOptions()
                options.log_severity_level = 3
                # onnxruntime's memory pattern keeps one block per input shape it has seen, and
                # every batch here has its own width: the blocks piled up to ~150 MB over an
                # import, for no measurable speed (docs/PERFORMANCE.md, "Importing coding-agent
                # sessions").
                options.enable_mem_pattern = False
                if self._threads:
                    options.intra_op_num_threads = self._threads
                # The graph whose word-embedding table stays int8 (ocat.memory.embedding.lean_graph):
                # the same vectors, bit for bit, from a session ~85 MiB smaller that loads twice as fast.
                model_file = model_dir / "model.onnx"
                source = session_source(model_file, notify=notify)

                def session_of(source: str | bytes) -> Any:
                    return onnxruntime.InferenceSession(
                        source,
                        sess_options=options,
                        providers=["CPUExecutionProvider"],
                        # Folding the weights' scaling into float32 copies is what the session's size is.
                        disabled_optimizers=["ConstantFolding"] if few_texts else None,
                    )

                try:
                    session = session_of(source)
                except Exception as exc:
                    if not is_cached_graph(source):
                        raise
                    # A cached graph that matched its record and still does not load (the record
                    # was altered with it): made again from the model, once.
                    why = f"onnxruntime cannot load it: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                    session = session_of(remake(model_file, why, notify=notify))
            except Exception as exc:
                raise EmbeddingError(f"cannot load the embedding model in {model_dir}: {exc}") from exc
            self._input_names = {i.name for i in session.get_inputs()}
            self._tokenizer = tokenizer
            self._session = session
            self._made_by = (model_dir, few_texts)

    def shrink(self) -> None:
        """Give back what the session's memory arena grew to past its first block: the largest
        batch embedded so far holds ~20-50 MB there for the session's life otherwise. One run of
        two word pieces with onnxruntime's arena shrinkage, which frees every block left unused
        at its end; the next batch takes what it needs again (docs/PERFORMANCE.md, "Idle memory")."""
        session = self._session
        if session is None:
            return
        import numpy as np

        options = _shrink_options()
        ids = np.array([[101, 102]], dtype=np.int64)  # [CLS] [SEP]
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        session.run(None, feeds, options)

    def ready(self) -> bool:
        """Whether texts can be embedded without fetching the model first."""
        return self._session is not None or self._present()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts in length-sorted batches; returns vectors in the input order."""
        if not texts:
            return []
        self._load()
        # None unless this process was asked to keep vectors (ocat.memory.embedding.vector_cache).
        kept = self._kept()
        return kept.through(texts, self._embedded) if kept is not None else self._embedded(texts)

    def _kept(self) -> VectorCache | None:
        model_dir, few_texts = self._made_by or (Path(), False)
        return kept_in(model_dir, few_texts=few_texts, threads=self._threads, dimensions=self.dimensions)

    def _embedded(self, texts: Sequence[str]) -> list[list[float]]:
        import numpy as np

        # Every word makes at least one word piece, so the first 2 x MAX_TOKENS words hold
        # all the model reads: the vector is the same, the cost bounded.
        encodings = self._tokenizer.encode_batch([leading_words(t, 2 * MAX_TOKENS) for t in texts])
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        result: list[list[float]] = [[] for _ in texts]
        batch: list[int] = []
        for i in order:
            # Sorted by length, so this text is the batch's longest: it sets the padded width.
            if batch and (len(batch) == BATCH_SIZE or (len(batch) + 1) * len(encodings[i].ids) > BATCH_TOKENS):
                self._embed_batch(batch, encodings, result, np)
                batch = []
            batch.append(i)
        self._embed_batch(batch, encodings, result, np)
        return result

    def passages(self, text: str) -> list[str]:
        """The parts of `text` the model cannot see in its first window: windows of up to MAX_TOKENS
        word pieces, each overlapping the one before by PASSAGE_OVERLAP, the last one ending with
        the text and at least MIN_PASSAGE long; at most MAX_PASSAGES; none for a text that fits
        (docs/RETRIEVAL.md, "Passage vectors")."""
        self._load()
        window = MAX_TOKENS - 2  # [CLS] and [SEP] take two places
        encoding = self._tokenizer.encode(leading_words(text, window * (MAX_PASSAGES + 1)))
        if not encoding.overflowing:
            return []
        # Every word piece's span in the text, once: windows overlap by PASSAGE_OVERLAP.
        parts = [encoding, *encoding.overflowing]
        spans = sorted({span for part in parts for span in part.offsets if span[1] > span[0]})
        step = window - PASSAGE_OVERLAP
        starts: list[int] = []
        start = step
        while start + window < len(spans) and len(starts) < MAX_PASSAGES - 1:
            starts.append(start)
            start += step
        # The last window ends with the text (when it is in reach) and reaches back at least
        # MIN_PASSAGE word pieces: a scrap of a few words is close to any short question.
        starts.append(max(1, min(start, len(spans) - MIN_PASSAGE)) if start + window >= len(spans) else start)
        return [text[spans[s][0] : spans[min(s + window, len(spans)) - 1][1]] for s in starts]

    def _embed_batch(self, batch: list[int], encodings: list[Any], result: list[list[float]], np: Any) -> None:
        width = max(len(encodings[i].ids) for i in batch)
        input_ids = np.zeros((len(batch), width), dtype=np.int64)  # 0 is [PAD]
        attention = np.zeros((len(batch), width), dtype=np.int64)
        for row, i in enumerate(batch):
            ids = encodings[i].ids
            input_ids[row, : len(ids)] = ids
            attention[row, : len(ids)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": attention}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        hidden = self._session.run(None, feeds)[0]
        mask = attention[:, :, None].astype(np.float32)
        pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        vectors = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32).tolist()
        for i, vector in zip(batch, vectors):
            result[i] = vector


# The tokenizers read in this process, by their file's identity (device, inode, size, mtime).
_tokenizers: dict[tuple[int, int, int, int], Any] = {}
_tokenizers_lock = threading.Lock()


def tokenizer_of(path: Path) -> Any:
    """The model's tokenizer at `path`, set up as the local model reads with it; read once per
    process for each file (~0.07-0.1 s of CPU: every embedder of a process, every store it opens,
    read it again). A file changed since is read again. Shared: it is only ever read from."""
    stat = path.stat()
    identity = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    with _tokenizers_lock:
        if identity not in _tokenizers:
            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_file(str(path))
            # The shipped tokenizer pads every text to a fixed length; each batch is padded only to
            # its longest member instead, which is most of the speed. The windows past the first
            # come back as the encoding's `overflowing` (passages).
            tokenizer.enable_truncation(max_length=MAX_TOKENS, stride=PASSAGE_OVERLAP)
            tokenizer.no_padding()
            _tokenizers[identity] = tokenizer
        return _tokenizers[identity]


class LiteLLMEmbedder:
    """Any embedding model litellm reaches (OpenAI, Ollama, ...); needs that provider's credentials."""

    def __init__(self, model: str, dimensions: int, *, api_base: str | None = None, api_key: str | None = None) -> None:
        self.name = model
        self.dimensions = dimensions
        self._api_base = api_base
        self._api_key = api_key

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed texts through litellm.embedding, normalising the vectors."""
        if not texts:
            return []
        vectors: list[list[float]] = []
        for start in range(0, len(texts), LITELLM_BATCH):
            batch = [leading_words(t, LITELLM_MAX_WORDS) for t in texts[start : start + LITELLM_BATCH]]
            try:
                raw = embed(self.name, batch, api_base=self._api_base, api_key=self._api_key)
            except Exception as exc:
                raise EmbeddingError(f"embedding model {self.name} failed: {exc}") from exc
            vectors.extend(_normalise(vector) for vector in raw)
        if vectors and len(vectors[0]) != self.dimensions:
            raise EmbeddingError(
                f"embedding model {self.name} returned {len(vectors[0])}-d vectors; "
                f"embedding.dimensions says {self.dimensions}"
            )
        return vectors


def preload_embedder(
    settings: EmbeddingSettings, *, few_texts: bool = False, notify: Callable[[str], None] | None = None
) -> None:
    """Load the configured local model now (its ONNX session and tokenizer), if it is on this
    machine; nothing is fetched, and a failure is left to the first embedding, which says it.
    `few_texts`: for a process that embeds only a handful (OnnxMiniLMEmbedder.load); `notify`
    hears that the model's cached graph was damaged and made again."""
    if settings.model != LOCAL_MODEL_NAME or find_model(settings) is None:
        return
    embedder = embedder_for(settings)
    if isinstance(embedder, OnnxMiniLMEmbedder):
        try:
            embedder.load(few_texts=few_texts, notify=notify)
        except Exception:
            pass


def release_idle_memory(embedder: Embedder) -> None:
    """Give back what a process that waits (a chat between turns) holds for nothing: the local
    model's arena past its first block (OnnxMiniLMEmbedder.shrink), and the pages the C heap has
    freed but kept (glibc's malloc_trim: ~60 MB after the model's session is built, whose
    optimiser frees what it folded; nothing where the C library has no such call). The vectors
    stay the same, bit for bit."""
    if isinstance(embedder, OnnxMiniLMEmbedder):
        embedder.shrink()
    trim = getattr(_libc(), "malloc_trim", None)
    if trim is not None:
        trim(0)


def _libc() -> Any:
    try:
        return ctypes.CDLL(None)
    except OSError:  # pragma: no cover - a platform without a C library to open
        return None


_shrinking: Any = None


def _shrink_options() -> Any:
    """onnxruntime's run options that shrink the CPU arena at the end of a run (made once)."""
    global _shrinking
    if _shrinking is None:
        import onnxruntime

        options = onnxruntime.RunOptions()
        options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        _shrinking = options
    return _shrinking


def embedder_ready(embedder: Embedder) -> bool:
    """Whether an embedder can embed now, with nothing to fetch: upkeep of derived files (prompt
    vectors, passages) waits for a model that is not on this machine, and never fetches it."""
    ready = getattr(embedder, "ready", None)
    return bool(ready()) if callable(ready) else True


def has_passages(embedder: Embedder) -> bool:
    """Whether an embedder cuts texts at a window, and so gives long texts passages."""
    return callable(getattr(embedder, "passages", None))


def passages_of(embedder: Embedder, text: str) -> list[str]:
    """The passages of `text` an embedder would miss (see OnnxMiniLMEmbedder.passages); none for
    an embedder that reads whole texts (litellm models read thousands of tokens)."""
    return list(embedder.passages(text)) if has_passages(embedder) else []  # type: ignore[attr-defined]


def _normalise(vector: Sequence[float]) -> list[float]:
    norm = sum(x * x for x in vector) ** 0.5 or 1.0
    return [x / norm for x in vector]


_cache: dict[tuple[str, str], Embedder] = {}
_cache_lock = threading.Lock()


def embedder_for(settings: EmbeddingSettings) -> Embedder:
    """The embedder a config names, shared within the process (the ONNX session is costly)."""
    if settings.model == LOCAL_MODEL_NAME:
        if settings.dimensions != LOCAL_MODEL_DIMENSIONS:
            raise ConfigError(
                f"embedding.dimensions is {settings.dimensions}, but {LOCAL_MODEL_NAME} makes "
                f"{LOCAL_MODEL_DIMENSIONS}-d vectors"
            )
        # Found, or fetched, when the first text is embedded: a store opens, counts and
        # exports without the model, and front ends fetch it earlier to show progress.
        key = (settings.model, repr(settings))
        with _cache_lock:
            if key not in _cache:
                _cache[key] = OnnxMiniLMEmbedder(lambda: ensure_model(settings).path,
                                                 threads=settings.threads or None,
                                                 present=lambda: find_model(settings) is not None)
            return _cache[key]
    return LiteLLMEmbedder(settings.model, settings.dimensions)
