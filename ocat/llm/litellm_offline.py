"""litellm, imported on first use with its offline set-up, and the one embedding call.

The chat (ocat.llm) and the embedders (ocat.memory.embedding) both reach litellm through
here, so its set-up always applies: without it litellm fetches its price list from the
internet at import time, which stalls start-up on a machine with no network.
"""

from __future__ import annotations

import os
from typing import Any


def litellm() -> Any:
    """The litellm module, set up to stay offline and quiet (imported on first call: it takes seconds)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm as module

    module.suppress_debug_info = True  # it otherwise prints help links to stdout on errors
    module.telemetry = False
    return module


def embed(
    model: str, texts: list[str], *, api_base: str | None = None, api_key: str | None = None
) -> list[list[float]]:
    """One vector per text from a litellm embedding model, in order, as the provider returns them;
    provider failures propagate for the caller to word."""
    response = litellm().embedding(model=model, input=texts, api_base=api_base, api_key=api_key)
    return [item["embedding"] if isinstance(item, dict) else item.embedding for item in response.data]
