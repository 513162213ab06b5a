"""The local embedding model's files: where ocat looks for them, and fetching them on first need.

The model is obtained the way ChromaDB's own default embedding function obtains it: the same
archive, the same SHA-256, unpacked into the same cache folder, so a model that either tool
downloaded serves both. A download goes to a temporary name, is verified, then unpacked into a
temporary folder renamed into place: a model folder is whole or absent, whatever fails on the way.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Callable
import socket
from urllib.parse import urlsplit

from ocat.errors import EmbeddingError
from ocat.config.locations import cache_dir, display_path
from ocat.memory.embedding.lean_cache import CacheCheck, check_cache

if TYPE_CHECKING:
    from ocat.config.loading import EmbeddingSettings

LOCAL_MODEL_NAME = "all-MiniLM-L6-v2"
# ChromaDB's ONNXMiniLM_L6_V2.MODEL_DOWNLOAD_URL and _MODEL_SHA256 (a test checks they still agree).
CHROMA_MODEL_URL = "https://chroma-onnx-models.s3.amazonaws.com/all-MiniLM-L6-v2/onnx.tar.gz"
CHROMA_MODEL_SHA256 = "913d7300ceae3b2dbc2c50d1de4baacab4be7b9380491c27fab7418616a16ec3"
# The files ChromaDB checks for before it decides the model is there; ocat itself reads two.
MODEL_FILES = (
    "config.json", "model.onnx", "special_tokens_map.json", "tokenizer_config.json", "tokenizer.json", "vocab.txt"
)
NEEDED_FILES = ("model.onnx", "tokenizer.json")
FETCH_COMMAND = "ocat --fetch-model"
# Seconds to wait for the server to connect or to send the next bytes: offline fails at once
# (no DNS), a stalled connection within this, never a long hang.
NETWORK_TIMEOUT = 15.0
_READ_SIZE = 1 << 16

# Told (bytes received so far, total bytes or None when the server does not say).
DownloadProgress = Callable[[int, "int | None"], None]


def chroma_model_dir() -> Path:
    """Where ChromaDB keeps the model: `~/.cache/chroma/...` whatever XDG_CACHE_HOME says."""
    return Path.home() / ".cache" / "chroma" / "onnx_models" / LOCAL_MODEL_NAME / "onnx"


def _xdg_chroma_model_dir() -> Path:
    # Where ocat looked before it followed ChromaDB's real location; still read, never written.
    return cache_dir() / "chroma" / "onnx_models" / LOCAL_MODEL_NAME / "onnx"


def has_model(folder: Path) -> bool:
    """True when the folder holds the files ocat loads the model from."""
    return all((folder / name).is_file() for name in NEEDED_FILES)


def model_target(settings: EmbeddingSettings) -> Path:
    """Where the model is fetched to: `embedding.model_path` when set, else ChromaDB's cache."""
    return Path(settings.model_path).expanduser() if settings.model_path else chroma_model_dir()


def candidate_dirs(settings: EmbeddingSettings) -> list[tuple[str, Path]]:
    """The folders searched for the model, in order, each with how a user would name it."""
    if settings.model_path:
        # An explicit folder is the only one: finding a different copy elsewhere would hide a typo.
        return [("embedding.model_path", model_target(settings))]
    found = [("ChromaDB's model cache", chroma_model_dir())]
    legacy = _xdg_chroma_model_dir()
    if legacy != found[0][1]:
        found.append(("$XDG_CACHE_HOME/chroma", legacy))
    return found


def find_model(settings: EmbeddingSettings) -> Path | None:
    """The first folder holding the model, or None (nothing is fetched)."""
    return next((folder for _, folder in candidate_dirs(settings) if has_model(folder)), None)


# The ways to the model that need no internet (docs/configuration.md), named whenever it is missing.
WITHOUT_INTERNET = (
    "a copy of the model's folder (model.onnx, tokenizer.json), named by embedding.model_path "
    "(OCAT_EMBEDDING_MODEL_PATH); a copy of ChromaDB's onnx.tar.gz, verified and unpacked by "
    f"`OCAT_EMBEDDING_DOWNLOAD_URL=file:///path/to/onnx.tar.gz {FETCH_COMMAND}`; or a mirror on your network, "
    "named by embedding.download_url: docs/configuration.md says how"
)


def missing_model_error(
    settings: EmbeddingSettings, reason: str | None = None, *, offline: bool = False
) -> EmbeddingError:
    """What to do when the model is not there: the command that fetches it, unless `offline` (it
    cannot help, and may be the command just run), and the ways that need no internet."""
    tried = ", ".join(display_path(folder) for _, folder in candidate_dirs(settings))
    what = reason or f"the local embedding model ({LOCAL_MODEL_NAME}) is not downloaded yet (looked in {tried})"
    how = "Without internet, any of these gets it" if offline else f"Retry with `{FETCH_COMMAND}`; without internet"
    return EmbeddingError(f"{what}. {how}: {WITHOUT_INTERNET}")


def require_model(settings: EmbeddingSettings) -> Path:
    """The model's folder, or the EmbeddingError saying how to get it (nothing is fetched)."""
    folder = find_model(settings)
    if folder is None:
        raise missing_model_error(settings)
    return folder


@dataclass(frozen=True)
class ModelSource:
    """Where the model archive is downloaded from, and the SHA-256 it must have."""

    url: str = CHROMA_MODEL_URL
    sha256: str = CHROMA_MODEL_SHA256

    @classmethod
    def from_settings(cls, settings: EmbeddingSettings) -> ModelSource:
        """ChromaDB's archive, or the mirror `embedding.download_url` names, with its checksum."""
        return cls(
            url=settings.download_url or CHROMA_MODEL_URL,
            sha256=(settings.download_sha256 or CHROMA_MODEL_SHA256).lower(),
        )


@dataclass(frozen=True)
class FetchResult:
    """Where the model is, and what fetching it took (nothing when it was already there)."""

    path: Path
    downloaded_bytes: int = 0
    seconds: float = 0.0
    # The model's cached graph, as `prepare_model` found it (made again when damaged).
    graph: CacheCheck | None = None

    @property
    def downloaded(self) -> bool:
        """True when this call downloaded the model (False: it was already there)."""
        return self.downloaded_bytes > 0

    def describe(self) -> str:
        """One line for the user: where the model is, and how much was downloaded."""
        where = display_path(self.path)
        if not self.downloaded:
            return f"The embedding model {LOCAL_MODEL_NAME} is ready in {where}."
        size = self.downloaded_bytes / 1e6
        return f"Downloaded the embedding model {LOCAL_MODEL_NAME} ({size:.1f} MB, {self.seconds:.0f} s) to {where}."


def uses_local_model(settings: EmbeddingSettings) -> bool:
    """True when the configured embedder is the local ONNX model (any other is a litellm model)."""
    return settings.model == LOCAL_MODEL_NAME


def prepare_model(
    settings: EmbeddingSettings,
    *,
    progress: DownloadProgress | None = None,
    notify: Callable[[str], None] | None = None,
    thorough: bool = False,
) -> FetchResult | None:
    """Make sure the configured embedder can run: the local model fetched if needed, and its
    cached graph checked, made again when damaged, which `notify` hears (`thorough`: the model's
    own SHA-256 checked too, ocat.memory.embedding.lean_cache). None for a litellm embedding
    model, which needs nothing on disk."""
    if not uses_local_model(settings):
        return None
    fetched = ensure_model(settings, progress=progress)
    return replace(fetched, graph=check_cache(fetched.path / "model.onnx", notify=notify, thorough=thorough))


def check_model_graph(settings: EmbeddingSettings, *, notify: Callable[[str], None] | None = None) -> CacheCheck | None:
    """The local model's cached graph checked thoroughly and made again when damaged
    (`ocat --check-store`, `--repair-store`); None for a litellm model or a model not on this
    machine (nothing is fetched)."""
    folder = find_model(settings) if uses_local_model(settings) else None
    return None if folder is None else check_cache(folder / "model.onnx", notify=notify, thorough=True)


def progress_words(done: int, total: int | None) -> str:
    """A download's progress as the header and stderr show it: `34% of 90.4 MB` or `12.0 MB`."""
    if total:
        return f"{min(100, done * 100 // total)}% of {total / 1e6:.1f} MB"
    return f"{done / 1e6:.1f} MB"


def ensure_model(settings: EmbeddingSettings, *, progress: DownloadProgress | None = None) -> FetchResult:
    """The model's folder, downloading the model first if no folder holds it.

    Raises EmbeddingError (saying what failed, the command to retry and the folder
    setting) when it is missing and cannot be fetched, or `embedding.download` is off.
    """
    folder = find_model(settings)
    if folder is not None:
        return FetchResult(folder)
    if not settings.download:
        raise missing_model_error(
            settings,
            f"the local embedding model ({LOCAL_MODEL_NAME}) is not in {display_path(model_target(settings))} "
            "and embedding.download is off",
        )
    return download_model(ModelSource.from_settings(settings), model_target(settings), settings, progress=progress)


def download_model(
    source: ModelSource,
    target: Path,
    settings: EmbeddingSettings,
    *,
    progress: DownloadProgress | None = None,
    timeout: float = NETWORK_TIMEOUT,
) -> FetchResult:
    """Download, verify and unpack the model archive into `target` (ChromaDB's layout: `onnx/...`).

    One process downloads at a time (a lock beside the target); one that waited finds the
    model there and returns at once.
    """
    from filelock import FileLock, Timeout

    started = time.monotonic()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        problem = f"cannot create {display_path(target.parent)}: {exc.strerror or exc}"
        raise missing_model_error(settings, problem) from exc
    lock = FileLock(str(target.parent / f".{target.name}.ocat-download.lock"))
    try:
        lock.acquire(timeout=600)
    except Timeout:
        raise missing_model_error(settings, "another process has been downloading the model for 10 minutes") from None
    except OSError as exc:  # a folder we may not write in
        problem = f"cannot write in {display_path(target.parent)}: {exc.strerror or exc}"
        raise missing_model_error(settings, problem) from None
    try:
        if has_model(target):
            return FetchResult(target)
        archive = _download(source, target.parent, settings, progress, timeout)
        try:
            _unpack(archive.path, target, settings)
        finally:
            archive.path.unlink(missing_ok=True)
        return FetchResult(target, archive.size, time.monotonic() - started)
    finally:
        lock.release()


@dataclass(frozen=True)
class _Archive:
    path: Path
    size: int


def _download(
    source: ModelSource,
    folder: Path,
    settings: EmbeddingSettings,
    progress: DownloadProgress | None,
    timeout: float,
) -> _Archive:
    """The archive, downloaded beside the target under a temporary name and checked."""
    # Imported here: only a download needs the network stack (ssl included).
    import http.client
    import urllib.error
    import urllib.request

    handle, name = tempfile.mkstemp(prefix=".onnx.tar.gz.", suffix=".part", dir=folder)
    path = Path(name)
    digest = hashlib.sha256()
    received = 0
    try:
        with os.fdopen(handle, "wb") as out:
            # A configured URL: embedding.download_url allows http(s):// and file:// only (ocat.config.settings).
            request = urllib.request.Request(source.url, headers={"User-Agent": "ocat"})  # noqa: S310
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
                length = response.headers.get("Content-Length")
                total = int(length) if length and length.isdigit() else None
                if progress:
                    progress(0, total)
                while chunk := response.read(_READ_SIZE):
                    out.write(chunk)
                    digest.update(chunk)
                    received += len(chunk)
                    if progress:
                        progress(received, total)
        if total is not None and received != total:
            raise _failed(source, settings, f"the download stopped after {received} of {total} bytes")
        if digest.hexdigest() != source.sha256:
            raise _failed(
                source,
                settings,
                f"the file's SHA-256 is {digest.hexdigest()}, not the expected {source.sha256} "
                "(a broken download, or a mirror serving another file: check embedding.download_sha256)",
            )
    except EmbeddingError:
        path.unlink(missing_ok=True)
        raise
    except urllib.error.HTTPError as exc:
        path.unlink(missing_ok=True)
        raise _failed(source, settings, f"the server answered {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        path.unlink(missing_ok=True)
        if isinstance(exc.reason, socket.gaierror):
            host = urlsplit(source.url).hostname
            raise _failed(source, settings, f"cannot resolve {host} (is this machine offline?)", offline=True) from None
        raise _failed(source, settings, _reason(exc.reason)) from None
    except (OSError, ValueError, http.client.HTTPException) as exc:
        # A reset, cut-off or timed-out connection, a server that does not speak HTTP, a disk error, a bad URL.
        path.unlink(missing_ok=True)
        raise _failed(source, settings, _reason(exc)) from None
    except BaseException:  # Ctrl+C included: no half-written file stays behind
        path.unlink(missing_ok=True)
        raise
    return _Archive(path, received)


def _reason(error: object) -> str:
    if isinstance(error, TimeoutError) or "timed out" in str(error):
        return "the server did not answer in time"
    text = getattr(error, "strerror", None) or str(error)
    return text or type(error).__name__


def _failed(source: ModelSource, settings: EmbeddingSettings, why: str, *, offline: bool = False) -> EmbeddingError:
    reason = f"cannot download the embedding model from {source.url}: {why}"
    return missing_model_error(settings, reason, offline=offline)


def _unpack(archive: Path, target: Path, settings: EmbeddingSettings) -> None:
    """Unpack the model files into a temporary folder beside `target`, then rename it into place.

    Only the known model files are written, by name: nothing in the archive chooses a path.
    """
    import tarfile

    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent))
    try:
        try:
            with tarfile.open(archive, mode="r:gz") as tar:
                for member in tar:
                    name = Path(member.name).name
                    if member.isfile() and name in MODEL_FILES:
                        source = tar.extractfile(member)
                        assert source is not None  # a regular file always has contents
                        with source, (staging / name).open("wb") as out:
                            shutil.copyfileobj(source, out)
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise missing_model_error(settings, f"cannot unpack the downloaded model: {exc}") from None
        if not has_model(staging):
            missing = ", ".join(n for n in NEEDED_FILES if not (staging / n).is_file())
            raise missing_model_error(settings, f"the downloaded archive has no {missing}")
        if not target.exists():
            staging.chmod(0o755)  # mkdtemp makes it private; a model folder is not a secret
            staging.rename(target)
            return
        # The folder exists (a configured model_path, or an incomplete copy): move the files in
        # one by one, model.onnx last, so that neither ocat nor ChromaDB sees a model until it
        # is whole, and nothing else in the folder is touched.
        for name in sorted(os.listdir(staging), key=lambda n: n == "model.onnx"):
            os.replace(staging / name, target / name)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


class ProgressPrinter:
    """A download's progress on a stream (stderr): one line rewritten in place on a terminal,
    a line every 10% otherwise, so logs stay short. Call `finish` when the download ends."""

    def __init__(self, stream: IO[str], *, prefix: str = "ocat: ") -> None:
        self.stream = stream
        self.prefix = prefix
        self.rewrite = bool(getattr(stream, "isatty", lambda: False)())
        self._shown: str | None = None
        self._step = -1

    def __call__(self, done: int, total: int | None) -> None:
        if self._shown is None:
            size = f", {total / 1e6:.1f} MB" if total else ""
            self.stream.write(f"{self.prefix}fetching the embedding model {LOCAL_MODEL_NAME} (needed once{size})\n")
            self._step = 0  # the first line said 0%
        step = done * 10 // total if total else done // 10_000_000
        words = f"{self.prefix}downloading the embedding model: {progress_words(done, total)}"
        if self.rewrite and words != self._shown:
            self.stream.write("\r" + words.ljust(len(self._shown or "")))
        elif not self.rewrite and step != self._step:
            self.stream.write(words + "\n")
        self._shown, self._step = words, step
        self.stream.flush()

    def finish(self, fetched: FetchResult | None = None) -> None:
        """End the rewritten line, if one was shown, then say where a downloaded model went."""
        if self.rewrite and self._shown is not None:
            self.stream.write("\n")
        self._shown = None
        if fetched is not None and fetched.downloaded:
            self.stream.write(f"{self.prefix}{fetched.describe()}\n")
        self.stream.flush()
