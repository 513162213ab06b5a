"""Token counting with tiktoken, offline: litellm ships the encoding files, so use them."""

from __future__ import annotations

import importlib.util
import os
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tiktoken import Encoding

ENCODING = "cl100k_base"


@lru_cache(maxsize=1)
def _encoding() -> Encoding | None:
    if "TIKTOKEN_CACHE_DIR" not in os.environ:
        # tiktoken downloads its encodings on first use; litellm bundles them, so point
        # tiktoken there (found without importing litellm, which is slow).
        spec = importlib.util.find_spec("litellm")
        if spec and spec.origin:
            bundled = os.path.join(os.path.dirname(spec.origin), "litellm_core_utils", "tokenizers")
            if os.path.isdir(bundled):
                os.environ["TIKTOKEN_CACHE_DIR"] = bundled
    try:
        import tiktoken

        return tiktoken.get_encoding(ENCODING)
    except Exception:
        return None


def count_tokens(text: str) -> int:
    """Tokens in a text (cl100k_base); about a quarter of the characters if tiktoken cannot load."""
    encoding = _encoding()
    if encoding is None:
        return (len(text) + 3) // 4
    return len(encoding.encode(text, disallowed_special=()))
