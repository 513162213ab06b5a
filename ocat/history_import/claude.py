"""Reading Claude's data export (`conversations.json`): each conversation's list of messages."""

from __future__ import annotations

from typing import Any

from ocat.history_import.model import ConversationProblem, HistoryItem, ImportedConversation
from ocat.history_import.pairing import Message, pair_messages
from ocat.history_import.values import not_an_object, ident, iso_epoch, text

SOURCE = "claude"
_ROLES = {"human": "user", "assistant": "assistant"}


class _BadMessage(Exception):
    """A message that is no message; the text says which."""


def is_claude(item: Any) -> bool:
    """Whether an export's item looks like a Claude conversation."""
    return isinstance(item, dict) and "chat_messages" in item


def conversation(item: Any, number: int) -> HistoryItem:
    """The `number`th conversation of the export, or what is wrong with it."""
    if not isinstance(item, dict):
        return not_an_object(SOURCE, number)
    source_id = ident(item.get("uuid"))
    title = text(item.get("name"))
    chat = item.get("chat_messages")
    if not isinstance(chat, list):
        return ConversationProblem(SOURCE, source_id, title, "the conversation has no list of chat_messages")
    try:
        messages = [_message(message, index) for index, message in enumerate(chat, 1)]
    except _BadMessage as exc:
        return ConversationProblem(SOURCE, source_id, title, str(exc))
    except Exception as exc:  # one odd conversation must not stop the others
        return ConversationProblem(SOURCE, source_id, title, f"conversation {number} could not be read: {exc!r}")
    return ImportedConversation(
        source=SOURCE,
        source_id=source_id,
        title=title,
        created=iso_epoch(item.get("created_at")),
        exchanges=pair_messages(messages),
    )


def _message(message: Any, index: int) -> Message:
    if not isinstance(message, dict):
        raise _BadMessage(f"message {index} is not a JSON object")
    sender = message.get("sender")
    role = _ROLES.get(sender, "") if isinstance(sender, str) else ""
    body = _body(message, index)
    if role == "user":
        body = _with_attachments(body, message)
    return Message(role, body, iso_epoch(message.get("created_at")), ident(message.get("uuid")))


def _body(message: dict[str, Any], index: int) -> str:
    """`text` when it says something, else the text blocks of `content` (tool use is left out)."""
    raw = message.get("text")
    if raw is not None and not isinstance(raw, str):
        raise _BadMessage(f"message {index} is not text (its text is {type(raw).__name__})")
    body = text(raw)
    if body and not body.isspace():
        return body
    blocks = message.get("content")
    if not isinstance(blocks, list):
        return ""
    pieces = [
        piece
        for block in blocks
        if isinstance(block, dict) and block.get("type") == "text" and (piece := text(block.get("text")))
    ]
    return "\n\n".join(pieces)


def _with_attachments(body: str, message: dict[str, Any]) -> str:
    """The human's text followed by each attachment's extracted text, and a line per other file."""
    pieces = [body] if body else []
    names: set[str] = set()
    attachments = message.get("attachments")
    for attachment in attachments if isinstance(attachments, list) else ():
        if not isinstance(attachment, dict):
            continue
        name = text(attachment.get("file_name")) or "unnamed"
        names.add(name)
        content = text(attachment.get("extracted_content"))
        pieces.append(f"[attachment {name}]\n{content}" if content else f"[attachment {name}]")
    files = message.get("files")
    for file in files if isinstance(files, list) else ():
        # Uploaded images and PDFs come without their text: say that one was there.
        name = text(file.get("file_name")) if isinstance(file, dict) else ""
        if name and name not in names:
            pieces.append(f"[file {name}]")
    return pieces[0] if len(pieces) == 1 else "\n\n".join(pieces)
