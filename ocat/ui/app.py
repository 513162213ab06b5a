"""The full-screen chat: paint first, load memory in a worker, stream answers as Markdown.

Workers never touch widgets directly for long: memory loading runs in a thread and reports
with a message; a chat turn is an async worker that can be cancelled (Esc), keeps what
arrived, and stores nothing for a cancelled or failed turn.
"""

from __future__ import annotations

import asyncio
import time

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Footer, Static
from textual.worker import Worker, WorkerState

from ocat.commands import CommandResult, is_command, run_command
from ocat.errors import OcatError
from ocat.llm import Usage
from ocat.locations import display_path
from ocat.session import ChatSession
from ocat.themes import load_themes
from ocat.ui.widgets import NoticeMessage, PromptInput, UserMessage, command_view, memory_indicator


def usage_line(usage: Usage | None, seconds: float) -> str:
    """The last turn's tokens and cost, for the status line."""
    if usage is None or not usage.total_tokens:
        return ""  # dummy mode, or a provider that reports no usage
    cost = f" · ${usage.cost_usd:.4f}" if usage.cost_usd is not None else ""
    return f"last answer {seconds:.1f}s · {usage.prompt_tokens} tokens in, {usage.completion_tokens} out{cost}"


class OcatApp(App[int]):
    """ocat's chat window."""

    CSS_PATH = "ocat.tcss"
    TITLE = "ocat"
    BINDINGS = [
        Binding("escape", "cancel", "Cancel answer", id="app.cancel"),
        Binding("ctrl+c", "cancel_or_quit", "Cancel/Quit", priority=True, id="app.cancel_or_quit"),
        Binding("ctrl+q", "quit", "Quit", id="app.quit"),
        Binding("ctrl+y", "copy_last", "Copy answer", id="app.copy_last"),
    ]

    class MemoryReady(Message):
        """The store opened (or failed to: `error` says why)."""

        def __init__(self, error: str | None) -> None:
            self.error = error
            super().__init__()

    def __init__(self, session: ChatSession, *, serve: bool = True) -> None:
        super().__init__()
        self.session = session
        self.serve = serve
        self.memory_state = "memory loading…" if session.settings.vector_store.enabled else "memory off"
        self.turn: Worker[None] | None = None
        self.last_answer = ""

    def compose(self) -> ComposeResult:
        yield Static(self._header_text(), id="header")
        yield VerticalScroll(id="conversation")
        yield Static("", id="status")
        yield PromptInput(id="prompt")
        yield Footer()

    def on_mount(self) -> None:
        self._load_themes()
        self.query_one(PromptInput).focus()
        # Stay scrolled to the newest message while answers and tables grow.
        self.query_one("#conversation", VerticalScroll).anchor()

    def on_ready(self) -> None:
        # Ready comes once the first frame is on screen: only then start chromadb and the
        # model, whose imports would otherwise compete with the first paint for the GIL.
        if self.session.settings.vector_store.enabled:
            self.load_memory()

    def _load_themes(self) -> None:
        """Register shipped and user themes, then apply display.theme (a bad one is reported)."""
        from textual.theme import Theme

        specs, problems = load_themes()
        for spec in specs:
            self.register_theme(Theme(**spec))
        for problem in problems:
            self.notify(problem, severity="warning", timeout=10)
        wanted = self.session.settings.display.theme
        if wanted in self.available_themes:
            self.theme = wanted
        else:
            self.notify(f"unknown theme {wanted!r} (display.theme); using textual-dark", severity="warning")
            self.theme = "textual-dark"

    def _switch_theme(self, name: str) -> str:
        if not name:
            return "Themes: " + ", ".join(sorted(self.available_themes))
        if name not in self.available_themes:
            raise OcatError(f"no theme {name!r}; /theme lists them")
        self.theme = name
        return f"Theme: {name}"

    # -- memory ------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="memory")
    def load_memory(self) -> None:
        """Open the store off the UI thread: chromadb and the model load here, after first paint."""
        from ocat.memory import open_store

        try:
            self.session.store = open_store(self.session.settings, serve=self.serve)
            self.session.store.count("exchange")
            self.post_message(self.MemoryReady(None))
        except OcatError as exc:
            self.session.memory_error = str(exc)
            self.post_message(self.MemoryReady(str(exc)))

    def on_ocat_app_memory_ready(self, message: MemoryReady) -> None:
        if message.error:
            self.memory_state = "memory off"
            self._notice(f"Memory is off: {message.error}. The chat works without it.", error=True)
        else:
            store = self.session.store
            assert store is not None
            self.memory_state = f"{store.count('exchange')} exchanges"
        self._refresh_header()

    def _header_text(self) -> str:
        settings = self.session.settings
        config = display_path(settings.config_path) if settings.config_path else "default config"
        if settings.vector_store.host:
            where = f"http://{settings.vector_store.host}:{settings.vector_store.port}"
        else:
            where = display_path(str(settings.store_path))
        model = "dummy" if self.session.dummy else settings.llm.model
        return f"ocat · {config} · {model} · {where} · {self.memory_state}"

    def _refresh_header(self) -> None:
        self.query_one("#header", Static).update(self._header_text())

    # -- input -------------------------------------------------------------------

    def on_prompt_input_submitted(self, message: PromptInput.Submitted) -> None:
        prompt_box = self.query_one(PromptInput)
        text = message.text.strip()
        if self.turn is not None and self.turn.state in (WorkerState.PENDING, WorkerState.RUNNING):
            self.notify("Still answering: Esc cancels.", severity="warning")
            return
        prompt_box.text = ""
        if is_command(text):
            self.run_slash_command(text)
        else:
            self.turn = self.chat_turn(text)

    @work(exclusive=True, group="command")
    async def run_slash_command(self, text: str) -> None:
        """Run a command in a thread (it may touch the store) and show its result."""
        result = await asyncio.to_thread(run_command, self.session, text)
        if result.quit:
            self.exit(0)
            return
        if result.theme is not None:
            try:
                result = CommandResult(text=self._switch_theme(result.theme))
            except OcatError as exc:
                result = CommandResult(text=str(exc), error=True)
        if result.redraw:
            await self._redraw_conversation()
        await self._append(command_view(result))

    async def _redraw_conversation(self) -> None:
        """Show the session's conversation afresh (after /continue or /clear)."""
        from ocat.ui.answer import AssistantMessage

        conversation = self.query_one("#conversation", VerticalScroll)
        await conversation.remove_children()
        for exchange in self.session.history:
            answer = AssistantMessage()
            await conversation.mount_all([UserMessage(exchange.user_prompt), answer])
            await answer.update(exchange.assistant_response)
        conversation.scroll_end(animate=False)

    # -- a chat turn ---------------------------------------------------------------

    @work(exclusive=True, group="turn")
    async def chat_turn(self, prompt: str) -> None:
        """Recall, stream the answer, then store the exchange; Esc cancels, errors restore the prompt."""
        # Imported here: Markdown loads with the first answer, not before the first frame.
        from ocat.ui.answer import AssistantMessage

        await self._append(UserMessage(prompt))
        status = self.query_one("#status", Static)
        started = time.monotonic()
        ticker = self.set_interval(0.1, lambda: status.update(f"⠿ answering… {time.monotonic() - started:.1f}s  (Esc cancels)"))
        answer = AssistantMessage()
        pieces: list[str] = []
        try:
            had_memory = self.session.memory_on
            memories = await asyncio.to_thread(self.session.recall, prompt)
            if had_memory and not self.session.memory_on:
                self._notice(f"Memory is off: {self.session.memory_error}", error=True)
            indicator = memory_indicator(memories, self.session.settings.display.context_mode)
            if indicator is not None:
                await self._append(indicator)
            await self._append(answer)
            stream = AssistantMessage.get_stream(answer)
            answer_stream = self.session.stream(self.session.request(prompt, memories))
            try:
                async for piece in answer_stream:
                    pieces.append(piece)
                    await stream.write(piece)
            finally:
                await stream.stop()
        except asyncio.CancelledError:
            self._notice("Cancelled: the partial answer stays on screen and is not remembered.")
            raise
        except OcatError as exc:
            if not pieces:
                await answer.remove()
            self._notice(str(exc), error=True)
            prompt_box = self.query_one(PromptInput)
            if not prompt_box.text:
                prompt_box.text = prompt  # the prompt comes back, ready to retry
            return
        finally:
            ticker.stop()
            status.update("")
        status.update(usage_line(answer_stream.usage, time.monotonic() - started))
        text = "".join(pieces)
        self.last_answer = text
        await asyncio.to_thread(self.session.record, prompt, text, memories)
        if self.session.store is not None:
            self.memory_state = f"{self.session.store.count('exchange')} exchanges"
            self._refresh_header()

    async def _append(self, widget: object) -> None:
        conversation = self.query_one("#conversation", VerticalScroll)
        await conversation.mount(widget)  # type: ignore[arg-type]
        conversation.scroll_end(animate=False)

    def _notice(self, text: str, *, error: bool = False) -> None:
        conversation = self.query_one("#conversation", VerticalScroll)
        conversation.mount(NoticeMessage(text, error=error))
        conversation.scroll_end(animate=False)

    # -- actions -------------------------------------------------------------------

    def action_cancel(self) -> None:
        """Stop the answer being written."""
        if self.turn is not None and self.turn.state == WorkerState.RUNNING:
            self.turn.cancel()

    def action_cancel_or_quit(self) -> None:
        """Ctrl+C cancels an answer in progress, or quits when there is none."""
        if self.turn is not None and self.turn.state == WorkerState.RUNNING:
            self.turn.cancel()
        else:
            self.exit(0)

    def action_copy_last(self) -> None:
        """Copy the last answer as plain Markdown text."""
        if self.last_answer:
            self.copy_to_clipboard(self.last_answer)
            self.notify("Copied the last answer.")

    def on_unmount(self) -> None:
        if self.session.store is not None:
            self.session.store.close()
