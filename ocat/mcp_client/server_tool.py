"""One MCP server's tools as ocat names and shows them: each tool's qualified name (SERVER__TOOL,
within providers' limits), the tools a server listed, and a call's result as the text the
model reads (ocat.mcp_client.servers runs the servers; these are plain values).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

# Providers' limit on a function's name; a server's tools are named SERVER__TOOL within it.
NAME_LIMIT = 64
_ALLOWED = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


@dataclass(frozen=True)
class ServerTool:
    """One tool of one server, as the model is offered it (`qualified`) and as the server names it."""

    server: str
    name: str
    qualified: str
    description: str
    schema: dict[str, Any]
    read_only: bool


def qualified_name(server: str, tool: str, taken: set[str]) -> str:
    """`SERVER__TOOL` within providers' limits (`^[a-zA-Z0-9_-]{1,64}$`), unique among `taken`."""
    clean = "".join(ch if ch in _ALLOWED else "_" for ch in f"{server}__{tool}")[:NAME_LIMIT]
    name, number = clean, 2
    while name in taken:
        suffix = f"_{number}"
        name, number = clean[: NAME_LIMIT - len(suffix)] + suffix, number + 1
    return name


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


def tools_of(server: str, listed: Sequence[Any]) -> tuple[ServerTool, ...]:
    """The tools a server listed (the SDK's Tool objects), named for the model."""
    taken: set[str] = set()
    tools = []
    for tool in listed:
        qualified = qualified_name(server, tool.name, taken)
        taken.add(qualified)
        annotations = getattr(tool, "annotations", None)
        schema = dict(tool.input_schema or {"type": "object", "properties": {}})
        tools.append(ServerTool(server, tool.name, qualified, tool.description or tool.title or tool.name, schema,
                                bool(annotations is not None and annotations.read_only_hint)))
    return tuple(tools)
