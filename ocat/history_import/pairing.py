"""Pairing a conversation's messages into exchanges: each user message with the replies after it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ocat.history_import.model import ImportedExchange


@dataclass(frozen=True)
class Message:
    """One message of a conversation, already reduced to its text."""

    role: str
    """"user" or "assistant"; any other role is left out of the exchanges."""
    text: str
    timestamp: float | None
    source_id: str


def pair_messages(messages: Iterable[Message]) -> tuple[ImportedExchange, ...]:
    """Each user message with the assistant texts that follow it up to the next user message
    (joined by a blank line); a user message nobody answered keeps the answer "".

    Empty texts and roles other than user and assistant (system, tool) are skipped. Assistant
    text before the first user message is kept as an exchange with an empty prompt, rather than
    dropped: it was said in the conversation.
    """
    exchanges: list[ImportedExchange] = []
    prompt: Message | None = None
    answers: list[Message] = []

    def close() -> None:
        if prompt is None and not answers:
            return
        first = prompt or answers[0]
        timestamp = first.timestamp
        if timestamp is None:
            timestamp = next((a.timestamp for a in answers if a.timestamp is not None), None)
        exchanges.append(
            ImportedExchange(
                prompt=prompt.text if prompt else "",
                # One answer is kept as it is: a long message is not copied by a join.
                answer=answers[0].text if len(answers) == 1 else "\n\n".join(a.text for a in answers),
                timestamp=timestamp,
                source_id=first.source_id,
            )
        )

    for message in messages:
        if not message.text or message.text.isspace():  # isspace copies nothing
            continue
        if message.role == "user":
            close()
            prompt, answers = message, []
        elif message.role == "assistant":
            answers.append(message)
    close()
    return tuple(exchanges)
