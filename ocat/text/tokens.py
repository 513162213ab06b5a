"""Counting tokens: with tiktoken's cl100k_base when its file is on this machine, else an
estimate; budgets always by the estimate.

tiktoken fetches an encoding's file on first use. ocat never lets it: offline, the attempt
cost a failed name lookup (0.25-0.3 s, longer with a slow resolver) on every run, only to fall
back to the estimate; online it wrote into whatever folder was named. The file is looked for
where tiktoken caches it (TIKTOKEN_CACHE_DIR, its temporary folder) and where litellm
bundles encodings, found without importing litellm, which is slow.

The soft budgets (the wake block's, the memories' and the tool results' shares) are counted
by `estimate_tokens`, on every face: the same block whether or not tiktoken is loaded, and a
one-shot `--ask` need not load it (0.3 s and ~50 MB). The estimate is what every figure in
docs/RETRIEVAL.md was measured with (tiktoken's file was not on the machine).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tiktoken import Encoding

ENCODING = "cl100k_base"
# Where tiktoken fetches the encoding from; its cached copy is named by this address's SHA-1.
ENCODING_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


def encoding_folder() -> str | None:
    """The folder holding the encoding's file, cached by tiktoken or bundled by litellm (None: not here)."""
    name = hashlib.sha1(ENCODING_URL.encode()).hexdigest()
    folders = [os.environ.get("TIKTOKEN_CACHE_DIR"), os.environ.get("DATA_GYM_CACHE_DIR"),
               os.path.join(tempfile.gettempdir(), "data-gym-cache")]
    spec = importlib.util.find_spec("litellm")
    if spec and spec.origin:
        folders.append(os.path.join(os.path.dirname(spec.origin), "litellm_core_utils", "tokenizers"))
    return next((folder for folder in folders if folder and os.path.isfile(os.path.join(folder, name))), None)


@lru_cache(maxsize=1)
def _encoding() -> Encoding | None:
    folder = encoding_folder()
    if folder is None:
        return None  # not fetched: counted by the estimate
    os.environ["TIKTOKEN_CACHE_DIR"] = folder
    try:
        import tiktoken

        return tiktoken.get_encoding(ENCODING)
    except Exception:  # a damaged file: tiktoken would fetch it again; estimate instead
        return None


def count_tokens(text: str) -> int:
    """Tokens in a text (cl100k_base); the estimate when the encoding is not on this machine."""
    encoding = _encoding()
    if encoding is None:
        return estimate_tokens(text)
    return len(encoding.encode(text, disallowed_special=()))


def estimate_tokens(text: str) -> int:
    """Tokens in a text, estimated without a tokenizer: a quarter of its ASCII characters and
    half of the others (Cyrillic, CJK and the like take more tokens per character)."""
    other = sum(1 for char in text if ord(char) > 127) if not text.isascii() else 0
    return (len(text) - other + 3) // 4 + (other + 1) // 2
