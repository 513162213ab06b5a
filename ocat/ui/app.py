"""The full-screen chat: paint first, load memory in a worker, stream answers as Markdown.

Workers never touch widgets directly for long: memory loading runs in a thread and reports
with a message; a chat turn is an async worker that can be cancelled (Esc), keeps what
arrived, and stores nothing for a cancelled or failed turn.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Footer, Static
from textual.worker import Worker, WorkerState

from ocat.commands import CommandResult, is_command, run_command
from ocat.errors import Cancelled, OcatError
from ocat.locations import display_path
from ocat.session import ChatSession
from ocat.text import printable
from ocat.themes import load_themes
from ocat.ui.keys import keymap
from ocat.ui.screens import ChoicePicker, ConfirmDialog
from ocat.ui.status import answering_line, exchange_count, usage_line
from ocat.ui.widgets import (
    CommandSuggestions,
    NoticeMessage,
    PromptInput,
    TaskProgress,
    UserMessage,
    command_view,
    memory_indicator,
)

if TYPE_CHECKING:
    from ocat.ui.answer import AssistantMessage  # loaded with the first answer, after the first frame


class OcatApp(App[int]):
    """ocat's chat window."""

    CSS_PATH = "ocat.tcss"
    TITLE = "ocat"
    BINDINGS = [
        Binding("escape", "cancel", "Cancel answer", id="app.cancel"),
        Binding("ctrl+c", "cancel_or_quit", "Cancel/Copy/Quit", show=False, priority=True, id="app.cancel_or_quit"),
        Binding("ctrl+q", "quit", "Quit", id="app.quit"),
        Binding("ctrl+o", "copy_last", "Copy answer", id="app.copy_last"),
        Binding("ctrl+b", "copy_code", "Copy code", id="app.copy_code"),
    ]

    class MemoryReady(Message):
        """The store opened and the embedding model is ready (or not: `error` says why).

        `downloaded` describes a model fetched on the way; `saved` counts the exchanges
        made meanwhile that were then written to memory.
        """

        def __init__(self, error: str | None, *, downloaded: str | None = None, saved: int = 0) -> None:
            self.error = error
            self.downloaded = downloaded
            self.saved = saved
            super().__init__()

    class ModelProgress(Message):
        """The embedding model's first download has come this far (`total` None: unknown)."""

        def __init__(self, done: int, total: int | None) -> None:
            self.done = done
            self.total = total
            super().__init__()

    class ModelChecked(Message):
        """litellm is loaded; `problem` says what to set when the model has no credentials."""

        def __init__(self, problem: str | None) -> None:
            self.problem = problem
            super().__init__()

    def __init__(self, session: ChatSession, *, serve: bool = True) -> None:
        super().__init__()
        self.session = session
        self.serve = serve
        self.memory_state = "memory loading…" if session.settings.vector_store.enabled else "memory off"
        self.turn: Worker[None] | None = None
        self.command: Worker[None] | None = None
        self.last_answer = ""
        # The embedding model's download bar, while the first download runs.
        self._download: TaskProgress | None = None
        self.set_keymap(keymap(session.settings.keys))

    def compose(self) -> ComposeResult:
        yield Static(self._header_text(), id="header")
        yield VerticalScroll(id="conversation")
        yield Static("", id="status")
        yield CommandSuggestions(id="suggestions")
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
        if not self.session.dummy:
            self.check_model()

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
        """Open the store, then ready the embedding model (downloading it on first use), off the
        UI thread: chromadb and the model load here, after first paint. The chat is usable
        meanwhile; its exchanges are kept and written once memory is ready."""
        session = self.session
        if not session.open_memory(serve=self.serve):
            self.post_message(self.MemoryReady(session.memory_error))
            return
        from textual.worker import get_current_worker

        worker = get_current_worker()
        shown = [-1]

        def progress(done: int, total: int | None) -> None:
            if worker.is_cancelled:
                # The app is closing: stop the download now (it leaves nothing behind) rather
                # than keep the process alive until it ends.
                raise Cancelled("the chat closed before the embedding model was downloaded")
            # One message per percent (or per megabyte): the UI needs no more.
            step = done * 100 // total if total else done // 1_000_000
            if step != shown[0]:
                shown[0] = step
                self.post_message(self.ModelProgress(done, total))

        fetched = session.prepare_model(progress=progress)
        if not session.model_ready:
            self.post_message(self.MemoryReady(session.memory_error))
            return
        saved = session.save_unsaved()
        downloaded = fetched.describe() if fetched is not None and fetched.downloaded else None
        self.post_message(self.MemoryReady(session.memory_error, downloaded=downloaded, saved=saved))

    @work(thread=True, group="model")
    def check_model(self) -> None:
        """Load litellm after the first paint (so the first turn does not wait for it) and check credentials."""
        from ocat import llm

        self.post_message(self.ModelChecked(llm.credentials_problem(self.session.settings.llm)))

    def on_ocat_app_model_checked(self, message: ModelChecked) -> None:
        if message.problem:
            # The chat stays open: the user may fix the key, or only use the commands.
            self._notice(f"{message.problem}. Answers fail until then; the commands work.", error=True)

    async def on_ocat_app_model_progress(self, message: ModelProgress) -> None:
        from ocat.memory.model_files import progress_words

        if self._download is None:
            self._download = TaskProgress(hint="the chat works meanwhile")
            await self._append(self._download)
        label = "Downloading the embedding model, first use"
        self._download.show(label, message.done, message.total or 0)
        percent = f"{message.done * 100 // message.total}%" if message.total else progress_words(message.done, None)
        self.memory_state = f"downloading model {percent}"
        self._refresh_header()

    async def on_ocat_app_memory_ready(self, message: MemoryReady) -> None:
        if self._download is not None:
            await self._download.remove()
            self._download = None
        store = self.session.store
        if message.error:
            self.memory_state = "memory off"
            # The store is open when only the model is missing: what is said now is kept for it.
            still = " What you say is kept, and remembered once the model is there." if store is not None else ""
            self._notice(f"Memory is off: {message.error}. The chat works without it.{still}", error=True)
        else:
            assert store is not None
            self.memory_state = exchange_count(store.count("exchange"))
        if message.downloaded:
            verb = "is" if message.saved == 1 else "are"
            saved = f"; the {exchange_count(message.saved)} made meanwhile {verb} remembered too" if message.saved else ""
            self._notice(f"{message.downloaded} Memory is on{saved}.")
        self._refresh_header()

    def _header_text(self) -> str:
        settings = self.session.settings
        config = display_path(settings.config_path) if settings.config_path else "default config"
        if settings.vector_store.host:
            where = f"http://{settings.vector_store.host}:{settings.vector_store.port}"
        else:
            where = display_path(str(settings.store_path))
        model = "dummy" if self.session.dummy else settings.llm.model
        # Model and memory state first: they are what a narrow window must still show.
        return f"ocat · {model} · {self.memory_state} · {where} · {config}"

    def _refresh_header(self) -> None:
        self.query_one("#header", Static).update(self._header_text())

    async def _refresh_count(self) -> None:
        """Show the store's exchange count, read off the UI thread (it may be a server round trip)."""
        store = self.session.store
        if store is None or not self.session.memory_on:
            return
        try:
            count = await asyncio.to_thread(store.count, "exchange")
        except OcatError:
            return  # the header keeps its last count; the failing command says what went wrong
        self.memory_state = exchange_count(count)
        self._refresh_header()

    # -- input -------------------------------------------------------------------

    def on_prompt_input_submitted(self, message: PromptInput.Submitted) -> None:
        prompt_box = self.query_one(PromptInput)
        text = message.text.strip()
        if self.turn is not None and self.turn.state in (WorkerState.PENDING, WorkerState.RUNNING):
            self.notify("Still answering: Esc cancels.", severity="warning")
            return
        if self.command is not None and self.command.state in (WorkerState.PENDING, WorkerState.RUNNING):
            self.notify("A command is still running: Esc stops it.", severity="warning")
            return
        prompt_box.text = ""
        if is_command(text):
            self.command = self.run_slash_command(text)
        else:
            self.turn = self.chat_turn(text)

    @work(exclusive=True, group="command")
    async def run_slash_command(self, text: str) -> None:
        """Run a command in a thread (it may touch the store) and show its result.

        A long command (/vdoc) shows a progress bar while it runs; Esc stops it between
        two stored batches.
        """
        progress: list[TaskProgress] = []

        async def show_progress(label: str, done: int, total: int) -> None:
            if not progress:
                progress.append(TaskProgress())
                await self._append(progress[0])
            progress[0].show(label, done, total)

        self.session.cancel.clear()
        self.session.on_progress = lambda label, done, total: self.call_from_thread(show_progress, label, done, total)
        try:
            result = await asyncio.to_thread(run_command, self.session, text)
        finally:
            self.session.on_progress = None
            if progress:
                await progress[0].remove()
        if result.quit:
            self.exit(0)
            return
        if result.choose:
            self.push_screen(ChoicePicker(result.text, result.choices), self._run_choice(result.choose))
            return
        if result.confirm:
            self.push_screen(ConfirmDialog(result.text), self._run_confirmed(result.confirm))
            return
        if result.theme is not None:
            try:
                result = CommandResult(text=self._switch_theme(result.theme))
            except OcatError as exc:
                result = CommandResult(text=str(exc), error=True)
        if result.redraw:
            await self._redraw_conversation()
        await self._append(command_view(result))
        await self._refresh_count()  # commands add and delete memories

    def _run_choice(self, command: str):  # noqa: ANN202 - a screen callback
        def picked(value: str | None) -> None:
            if value is not None:
                self.command = self.run_slash_command(f"{command} {value}")

        return picked

    def _run_confirmed(self, command: str):  # noqa: ANN202 - a screen callback
        def answered(yes: bool | None) -> None:
            if yes:
                self.command = self.run_slash_command(command)
            else:
                self._notice("Nothing was deleted.")

        return answered

    async def _redraw_conversation(self) -> None:
        """Show the session's conversation afresh (after /continue or /clear)."""
        from ocat.ui.answer import AssistantMessage

        conversation = self.query_one("#conversation", VerticalScroll)
        await conversation.remove_children()
        for exchange in self.session.history:
            answer = AssistantMessage()
            await conversation.mount_all([UserMessage(exchange.user_prompt), answer])
            await answer.update(printable(exchange.assistant_response))
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
        ticker = self.set_interval(0.1, lambda: status.update(answering_line(time.monotonic() - started)))
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
            request = await asyncio.to_thread(self.session.request, prompt, memories)
            answer_stream = self.session.stream(request)
            try:
                async for piece in answer_stream:
                    pieces.append(piece)
                    await stream.write(printable(piece))  # the stored answer stays as it came
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
        await self._refresh_count()

    async def _append(self, widget: object) -> None:
        conversation = self.query_one("#conversation", VerticalScroll)
        await conversation.mount(widget)  # type: ignore[arg-type]
        conversation.scroll_end(animate=False)

    def _notice(self, text: str, *, error: bool = False) -> None:
        conversation = self.query_one("#conversation", VerticalScroll)
        conversation.mount(NoticeMessage(text, error=error))
        conversation.scroll_end(animate=False)

    # -- actions -------------------------------------------------------------------

    def _stop_running_work(self) -> bool:
        """Cancel the answer being written, or ask a long command to stop; False if neither runs."""
        if self.turn is not None and self.turn.state == WorkerState.RUNNING:
            self.turn.cancel()
            return True
        if self.command is not None and self.command.state == WorkerState.RUNNING:
            self.session.cancel.set()  # the command stops at its next step, keeping what it stored
            return True
        return False

    def action_cancel(self) -> None:
        """Stop the answer being written, or a long command."""
        self._stop_running_work()

    def action_cancel_or_quit(self) -> None:
        """Ctrl+C cancels an answer or a long command, else copies selected text, else quits."""
        if self._stop_running_work():
            return
        if self.screen.get_selected_text():
            self.screen.action_copy_text()
            self.screen.clear_selection()
        else:
            self.exit(0)

    def action_copy_last(self) -> None:
        """Copy the last answer as plain Markdown text."""
        if self.last_answer:
            self.copy_to_clipboard(self.last_answer)
            self.notify("Copied the last answer.")

    def action_copy_code(self) -> None:
        """Copy the last code block of the last answer."""
        from ocat.ui.answer import last_code_block

        code = last_code_block(self.last_answer)
        if code is None:
            self.notify("The last answer has no code block.", severity="warning")
            return
        self.copy_to_clipboard(code)
        self.notify(f"Copied a code block ({len(code.splitlines())} line(s)).")

    def on_assistant_message_code_clicked(self, message: AssistantMessage.CodeClicked) -> None:
        self.copy_to_clipboard(message.code)
        self.notify(f"Copied a code block ({len(message.code.splitlines())} line(s)).")

    def on_unmount(self) -> None:
        if self.session.store is not None:
            self.session.store.close()
