"""A tool's result (the SDK's CallToolResult) as the text the model reads."""

from __future__ import annotations

import json
from typing import Any


def result_text(result: Any) -> str:
    """A CallToolResult's content as the text the model reads (images and blobs named, not inlined)."""
    parts: list[str] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            size = len(getattr(block, "data", "") or "")
            parts.append(f"({kind} {getattr(block, 'mime_type', '')}, {size} bytes of base64)")
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(text if text is not None else f"(binary resource {resource.uri})")
        elif kind == "resource_link":
            parts.append(f"(resource {getattr(block, 'name', '')}: {block.uri})")
    structured = getattr(result, "structured_content", None)
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False, indent=1))
    return "\n".join(parts) if parts else "(no content)"
