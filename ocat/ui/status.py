"""The words of the status line: the answering spinner, usage and cost."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ocat.llm import Usage


def usage_line(usage: Usage | None, seconds: float) -> str:
    """The last turn's tokens and cost, for the status line."""
    if usage is None or not usage.total_tokens:
        return ""  # dummy mode, or a provider that reports no usage
    cost = f" · ${usage.cost_usd:.4f}" if usage.cost_usd is not None else ""
    return f"last answer {seconds:.1f}s · {usage.prompt_tokens} tokens in, {usage.completion_tokens} out{cost}"


SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def answering_line(seconds: float) -> str:
    """The status while an answer is on its way: a spinner frame and the time so far."""
    frame = SPINNER[int(seconds * 10) % len(SPINNER)]
    return f"{frame} answering… {seconds:.1f}s  (Esc cancels)"
