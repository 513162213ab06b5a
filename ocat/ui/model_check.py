"""The model's library, loaded after the first frame, and the chat told when the model has no credentials.

`ModelCheck` is a component the app owns (ocat.ui.app): a widget that is never displayed, so
that it can own its worker and handle that worker's message itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import work
from textual.message import Message
from textual.widget import Widget
from ocat.logs import log_failure
from ocat import llm

if TYPE_CHECKING:
    from ocat.chat.session import ChatSession
    from ocat.ui.conversation import Conversation


class ModelCheck(Widget):
    """Loading litellm off the first frame, then saying what to set if the model cannot answer."""

    DEFAULT_CSS = "ModelCheck { display: none; }"

    class ModelChecked(Message):
        """litellm is loaded; `problem` says what to set when the model has no credentials."""

        def __init__(self, problem: str | None) -> None:
            self.problem = problem
            super().__init__()

    def __init__(self, session: ChatSession, *, conversation: Conversation) -> None:
        super().__init__()
        self.session = session
        self.conversation = conversation

    @work(thread=True, group="model")
    def check_model(self) -> None:
        """Load litellm after the first paint (so the first turn does not wait for it) and check credentials."""
        settings = self.session.settings.llm
        try:
            llm.warm_up(settings)
            problem = llm.credentials_problem(settings)
        except Exception as exc:  # the first answer will say what is wrong; the chat must not end here
            log_failure("loading the model's library", exc)
            return
        self.post_message(self.ModelChecked(problem))

    def on_model_check_model_checked(self, message: ModelChecked) -> None:
        if message.problem:
            # The chat stays open: the user may fix the key, or only use the commands.
            self.conversation.notice(f"{message.problem}. Answers fail until then; the commands work.", error=True)
