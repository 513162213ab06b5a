"""The model's answer on screen: a Markdown widget that streams.

Apart from widgets.py so that Markdown (and markdown-it) load with the first answer,
not before the first frame (bench/startup.py, docs/PERFORMANCE.md).
"""

from __future__ import annotations

from textual.widgets import Markdown


class AssistantMessage(Markdown):
    """The model's answer, rendered as Markdown as it streams in."""

    def __init__(self) -> None:
        super().__init__("", classes="message assistant")
