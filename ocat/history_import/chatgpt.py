"""Reading ChatGPT's data export (`conversations.json`): the chosen branch of each message tree.

Each conversation is a tree (`mapping`: node id -> {message, parent, children}): editing a
prompt or regenerating an answer adds a sibling branch. Only the path from the root to
`current_node` is what the user ended up with, so only that path is read.
"""

from __future__ import annotations

from typing import Any

from ocat.history_import.model import ConversationProblem, HistoryItem, ImportedConversation
from ocat.history_import.pairing import Message, pair_messages
from ocat.history_import.values import not_an_object, epoch, ident, text

SOURCE = "chatgpt"
# Content that is the user's settings, not something said in the conversation.
_SKIPPED_CONTENT = frozenset({"user_editable_context", "model_editable_context"})


class _BrokenTree(Exception):
    """The message tree cannot be walked; the message says where."""


def is_chatgpt(item: Any) -> bool:
    """Whether an export's item looks like a ChatGPT conversation."""
    return isinstance(item, dict) and "mapping" in item and "current_node" in item


def conversation(item: Any, number: int) -> HistoryItem:
    """The `number`th conversation of the export, or what is wrong with it."""
    if not isinstance(item, dict):
        return not_an_object(SOURCE, number)
    source_id = ident(item.get("id")) or ident(item.get("conversation_id"))
    title = text(item.get("title"))
    try:
        path = _chosen_path(item)
        messages = [m for node in path if (m := _message(node)) is not None]
    except _BrokenTree as exc:
        return ConversationProblem(SOURCE, source_id, title, str(exc))
    except Exception as exc:  # one odd conversation must not stop the others
        return ConversationProblem(SOURCE, source_id, title, f"conversation {number} could not be read: {exc!r}")
    return ImportedConversation(
        source=SOURCE,
        source_id=source_id,
        title=title,
        created=epoch(item.get("create_time")),
        exchanges=pair_messages(messages),
    )


def _chosen_path(item: dict[str, Any]) -> list[dict[str, Any]]:
    """The nodes from the root to `current_node`, root first."""
    mapping = item.get("mapping")
    if not isinstance(mapping, dict):
        raise _BrokenTree("the conversation has no message tree (mapping)")
    current = item.get("current_node")
    if not isinstance(current, str) or current not in mapping:
        raise _BrokenTree(f"the current node {current!r} is not in the message tree")
    path: list[dict[str, Any]] = []
    seen: set[str] = set()
    node_id: Any = current
    child = ""
    while node_id is not None:
        if not isinstance(node_id, str) or node_id not in mapping:
            raise _BrokenTree(f"node {child} has the parent {node_id!r}, which is not in the message tree")
        if node_id in seen:
            raise _BrokenTree(f"the message tree has a cycle at node {node_id}")
        seen.add(node_id)
        node = mapping[node_id]
        if not isinstance(node, dict):
            raise _BrokenTree(f"node {node_id} is not a JSON object")
        path.append(node)
        child, node_id = node_id, node.get("parent")
    path.reverse()
    return path


def _message(node: dict[str, Any]) -> Message | None:
    """A node's message reduced to its role and text; None for the root and hidden messages."""
    message = node.get("message")
    if not isinstance(message, dict):
        return None  # the root node holds no message
    metadata = message.get("metadata")
    if isinstance(metadata, dict) and metadata.get("is_visually_hidden_from_conversation"):
        return None
    author = message.get("author")
    role = author.get("role") if isinstance(author, dict) else None
    return Message(
        role=role if isinstance(role, str) else "",
        text=_content_text(message.get("content")),
        timestamp=epoch(message.get("create_time")),
        source_id=ident(message.get("id")) or ident(node.get("id")),
    )


def _content_text(content: Any) -> str:
    """The text of a message's content, by its content_type; "" when it holds none."""
    if not isinstance(content, dict):
        return ""
    kind = content.get("content_type")
    if kind in _SKIPPED_CONTENT:
        return ""
    if kind in ("text", "multimodal_text"):
        parts = content.get("parts")
        if not isinstance(parts, list):
            return ""
        pieces = [piece for part in parts if (piece := _part_text(part))]
        # One piece is returned as it is (join of one string is that string, not a copy).
        return "\n".join(pieces)
    # code, execution_output, tether_quote, system_error ... carry `text`;
    # tether_browsing_display carries `result`; anything else (thoughts ...) is not said.
    return text(content.get("text")) or text(content.get("result"))


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return text(part)
    if isinstance(part, dict):
        if part.get("content_type") == "image_asset_pointer":
            return "[image]"
        return text(part.get("text"))  # e.g. an audio transcription
    return ""
