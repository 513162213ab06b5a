"""The full-screen chat: paint first, load memory in a worker, stream answers as Markdown.

Workers never touch widgets directly for long: memory loading (ocat.ui.memory_view) runs in
a thread and reports with messages; a chat turn is an async worker that can be cancelled
(Esc), keeps what arrived, and stores nothing for a cancelled or failed turn. Every worker
and command ends in one place that shows what failed and logs the traceback.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import TYPE_CHECKING, Sequence

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Footer, Static
from textual.worker import Worker, WorkerState

from ocat.logs import failure_text
from ocat.chat.session import ChatSession
from ocat.text.terminal import count_of, printable, without_controls
from ocat.config.themes import load_themes
from ocat.ui.keys import default_keys, keymap
from ocat.ui.command_view import CommandView
from ocat.ui.memory_view import MemoryState, MemoryStatus, MemoryView
from ocat.ui.palette import SlashCommands
from ocat.ui.prompt_focus import PromptFocus
from ocat.ui.status import answering_line, usage_line
from ocat.ui.widgets import (
    CommandSuggestions,
    NoticeMessage,
    PromptInput,
    TaskProgress,
    UserMessage,
    memory_indicator,
    wake_indicator,
    plain,
)

if TYPE_CHECKING:
    from ocat.ui.answer import AssistantMessage  # loaded with the first answer, after the first frame


class OcatApp(MemoryView, CommandView, PromptFocus, App[int]):
    """ocat's chat window."""

    CSS_PATH = "ocat.tcss"
    TITLE = "ocat"
    # Ctrl+P lists ocat's slash commands beside Textual's own (theme, keys, quit...).
    COMMANDS = App.COMMANDS | {SlashCommands}
    BINDINGS = [
        # The remappable keys come from config/default.yaml (the user's `keys.*` remap them).
        # First of the app's keys, so the footer shows it even at 80 columns.
        Binding(default_keys().memory, "memory", "Memory", id="app.memory"),
        Binding(default_keys().cancel, "cancel", "Cancel answer", id="app.cancel"),
        Binding("ctrl+c", "cancel_or_quit", "Cancel/Copy/Quit", show=False, priority=True, id="app.cancel_or_quit"),
        Binding(default_keys().quit, "quit", "Quit", id="app.quit"),
        Binding(default_keys().copy_answer, "copy_last", "Copy answer", id="app.copy_last"),
        Binding(default_keys().copy_code, "copy_code", "Copy code", id="app.copy_code"),
        Binding(default_keys().editor, "edit_prompt", "Editor", show=False, id="app.edit_prompt"),
    ]

    class ModelChecked(Message):
        """litellm is loaded; `problem` says what to set when the model has no credentials."""

        def __init__(self, problem: str | None) -> None:
            self.problem = problem
            super().__init__()

    def __init__(
        self, session: ChatSession, *, serve: bool = True, quick_exit: bool = False, notes: Sequence[str] = ()
    ) -> None:
        """`quick_exit` (the real chat, not tests): closing never waits for workers (ocat.ui.quick_exit).
        `notes`: what the command line has to say, shown first in the conversation."""
        super().__init__()
        self.notes = list(notes)
        self.session = session
        self.serve = serve
        self.quick_exit = quick_exit
        opening = session.settings.vector_store.enabled
        self.memory_status = MemoryStatus(MemoryState.LOADING if opening else MemoryState.OFF)
        self.turn: Worker[None] | None = None
        self.command: Worker[None] | None = None
        # Sends the prompts held in the box while an answer or a command ran (see on_prompt_input_submitted).
        self._held_sender: Worker[None] | None = None
        self.last_answer = ""
        # The embedding model's download bar, while the first download runs.
        self._download: TaskProgress | None = None
        # What memory is waiting for (another process's store), while it waits.
        self._memory_note: NoticeMessage | None = None
        # Giving the store up, once the window has closed (see on_unmount).
        self.closing: threading.Thread | None = None
        # Theme files that could not be loaded (ocat.config.themes), for /theme to list.
        self.theme_problems: list[str] = []
        self.set_keymap(keymap(session.settings.keys))

    def compose(self) -> ComposeResult:
        # Paths and model names are text, never markup: a store called "[b]" must not break the header.
        yield Static(plain(self._header_text()), id="header")
        yield VerticalScroll(id="conversation")
        yield Static("", id="status")
        yield CommandSuggestions(id="suggestions")
        yield PromptInput(id="prompt")
        yield Footer()

    def on_load(self) -> None:
        if self.quick_exit:
            from ocat.ui import quick_exit

            quick_exit.install()

    def on_mount(self) -> None:
        self._load_themes()
        self.query_one(PromptInput).focus()
        for note in self.notes:
            self._notice(note)
        # Stay scrolled to the newest message while answers and tables grow.
        self.query_one("#conversation", VerticalScroll).anchor()

    def on_ready(self) -> None:
        # Ready comes once the first frame is on screen: only then start chromadb and the
        # model, whose imports would otherwise compete with the first paint for the GIL.
        if self.session.settings.vector_store.enabled:
            self.load_memory_in_background()
        # The MCP servers start in the background too; a call not allowed beforehand asks here.
        from ocat.ui.consent import consent_asker

        self.session.server_tools.consent.ask = consent_asker(self)
        self.session.server_tools.start()
        if not self.session.dummy:
            self.check_model()
        self.load_commands()

    @work(thread=True, group="commands")
    def load_commands(self) -> None:
        """Import the slash commands after the first frame (a few dozen ms kept off it); a `/`
        typed sooner imports them itself."""
        import ocat.commands  # noqa: F401

    def _load_themes(self) -> None:
        """Register shipped and user themes, then apply display.theme (a bad one is reported)."""
        from textual.theme import Theme

        specs, problems = load_themes()
        self.theme_problems = problems  # /theme lists them too: a toast goes away
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

    @work(thread=True, group="model")
    def check_model(self) -> None:
        """Load litellm after the first paint (so the first turn does not wait for it) and check credentials."""
        from ocat import llm

        settings = self.session.settings.llm
        try:
            llm.warm_up(settings)
            problem = llm.credentials_problem(settings)
        except Exception as exc:  # the first answer will say what is wrong; the chat must not end here
            from ocat.logs import log_failure

            log_failure("loading the model's library", exc)
            return
        self.post_message(self.ModelChecked(problem))

    def on_ocat_app_model_checked(self, message: ModelChecked) -> None:
        if message.problem:
            # The chat stays open: the user may fix the key, or only use the commands.
            self._notice(f"{message.problem}. Answers fail until then; the commands work.", error=True)

    # -- input -------------------------------------------------------------------

    async def on_prompt_input_submitted(self, message: PromptInput.Submitted) -> None:
        """Send a prompt or run a command; while one runs, hold the prompt and send it after.

        The text has already left the box: PromptInput empties it in typing order, so keys
        typed after Enter are never wiped here.
        """
        prompt_box = self.query_one(PromptInput)
        text = message.text.strip()
        busy = self._work_under_way()
        if not busy and not prompt_box.held:
            self._begin(text, message.replaces)
            return
        # Sent while an answer or a command runs (or behind prompts already held): held, in
        # order, instead of dropped. Each Enter is its own prompt; none is merged or replaced.
        prompt_box.hold(text)
        if busy and busy[0] is self.turn:
            until = "when the answer ends (Esc cancels the answer)"
        elif busy:
            until = "when the command ends (Esc stops it)"
        else:
            until = "after the prompts queued before it"
        first_line = text.splitlines()[0]
        preview = first_line[:40] + ("…" if len(first_line) > 40 or "\n" in text else "")
        if self._held_sender is None:
            self._held_sender = self.run_worker(self._send_held(), group="held")
        # Let a turn started by the Enter just before this one (one burst of keys) show its
        # prompt first: its worker's first step mounts it, and runs before this resumes.
        await asyncio.sleep(0)
        self._notice(f"Queued «{preview}»: it sends {until}.")

    def _begin(self, text: str, replaces: str = "") -> None:
        """Run a command or start a turn; `replaces`: text is the edited prompt of that exchange
        (/edit last), which is taken back first (ocat.commands.editing), unless text is a command."""
        from ocat.commands import is_command, run_command, run_step

        if replaces and not is_command(text):
            from ocat.commands.editing import replace_last

            self.command = self.run_slash_command(
                "/edit", lambda: run_step("/edit last", lambda: replace_last(self.session, replaces, text))
            )
        elif is_command(text):
            self.command = self.run_slash_command(text.split(maxsplit=1)[0], lambda: run_command(self.session, text))
        else:
            self.turn = self.chat_turn(text)

    def _work_under_way(self) -> list[Worker[None]]:
        """The answer and the command under way, if any."""
        return [w for w in (self.turn, self.command) if w is not None and not w.is_finished]

    async def _send_held(self) -> None:
        """Send the held prompts in order, each once the work before it has ended."""
        from textual.worker import WorkerCancelled, WorkerFailed

        prompt_box = self.query_one(PromptInput)
        while True:
            busy = self._work_under_way()
            if busy:
                try:
                    await busy[0].wait()
                except (WorkerCancelled, WorkerFailed):
                    pass
                continue  # a command's dialog may have started another meanwhile
            # A held prompt goes whether the answer before it finished or was cancelled:
            # Esc is the way to say "stop this answer, go on with my next" (the notice
            # says so). A failed answer took the held prompts back into the box with its
            # own (PromptInput.put_back), so nothing is sent after a failure on its own.
            held = prompt_box.next_held()
            if held is None:
                self._held_sender = None
                return
            self._begin(held)

    # -- a chat turn ---------------------------------------------------------------

    @work(exclusive=True, group="turn")
    async def chat_turn(self, prompt: str) -> None:
        """Recall, stream the answer, then store the exchange; Esc cancels, errors restore the prompt."""
        # Imported here: Markdown loads with the first answer, not before the first frame.
        from ocat.ui.answer import AssistantMessage
        from ocat.ui.tool_calls import ToolCallView

        await self._append(UserMessage(prompt))
        status = self.query_one("#status", Static)
        started = time.monotonic()
        ticker = self.set_interval(0.1, lambda: status.update(answering_line(time.monotonic() - started)))
        answer = AssistantMessage()
        turn = self.session.turn(prompt)
        shown: dict[int, ToolCallView] = {}  # each tool call's line, by the call
        try:
            memories = await asyncio.to_thread(turn.recall)
            if turn.memory_lost:
                self._notice(f"Memory is off: {turn.memory_lost}", error=True)
                self._show_memory(MemoryStatus(MemoryState.OFF))
            elif turn.problem:  # this turn's search failed; memory stays on
                self._notice(f"Note: {turn.problem}.", error=True)
            context_mode = self.session.settings.display.context_mode
            if turn.wake_is_new and turn.wake is not None and context_mode == "on":
                await self._append(wake_indicator(turn.wake))
            indicator = memory_indicator(memories, context_mode)
            if indicator is not None:
                await self._append(indicator)
            await self._append(answer)
            stream = AssistantMessage.get_stream(answer)
            await asyncio.to_thread(turn.build_request)
            try:
                async for event in turn:
                    if isinstance(event, str):
                        await stream.write(printable(event))  # the stored answer stays as it came
                    elif id(event) in shown:
                        shown[id(event)].refresh_call()
                    else:  # a call starts: its line goes under the answer, and is updated when it ends
                        shown[id(event)] = ToolCallView(event, expanded=context_mode == "on")
                        await self._append(shown[id(event)])
            finally:
                await stream.stop()
            for note in turn.tool_notes:
                self._notice(f"Note: {note}.")
        except asyncio.CancelledError:
            turn.cancel()
            for view in shown.values():
                view.refresh_call()  # a call under way says it was cancelled
            self._notice("Cancelled: the partial answer stays on screen and is not remembered.")
            raise
        except Exception as exc:  # every failure of a turn is shown, and the prompt comes back
            if not turn.pieces:
                await answer.remove()
            self._notice(failure_text("the answer", exc), error=True)
            # The prompt comes back, ready to retry, cursor at its end (before anything typed since).
            boxes = self.query(PromptInput)  # none once the window is closing
            if boxes:
                boxes.first().put_back(prompt)
            return
        finally:
            ticker.stop()
            status.update("")
        status.update(usage_line(turn.usage, turn.elapsed()))
        self.last_answer = turn.text
        await asyncio.to_thread(turn.finish)
        self._say_what_was_remembered(turn)
        await self._refresh_count()

    def _conversation(self) -> VerticalScroll | None:
        """The conversation, or None once the window is closing: a worker (a queued command,
        a turn's last step) may finish after the screen has gone, and must not fail for it."""
        found = self.query("#conversation")
        return found.first(VerticalScroll) if found else None

    async def _append(self, widget: object) -> None:
        conversation = self._conversation()
        if conversation is not None:
            await conversation.mount(widget)  # type: ignore[arg-type]
            conversation.scroll_end(animate=False)

    def _notice(self, text: str, *, error: bool = False) -> None:
        conversation = self._conversation()
        # A turn cancelled by the window closing (Ctrl+Q mid-call) has nowhere left to say so.
        if conversation is not None and conversation.is_attached:
            conversation.mount(NoticeMessage(text, error=error))
            conversation.scroll_end(animate=False)

    # -- actions -------------------------------------------------------------------

    def _stop_running_work(self) -> bool:
        """Cancel the answer being written, or ask a long command to stop; False if neither runs."""
        if self.turn is not None and self.turn.state == WorkerState.RUNNING:
            self.turn.cancel()
            return True
        if self.command is not None and self.command.state == WorkerState.RUNNING:
            self.session.progress.stop()  # the command stops at its next step, keeping what it stored
            return True
        return False

    def action_cancel(self) -> None:
        """Stop the answer being written, or a long command; and bring focus back to the prompt
        if a click took it elsewhere."""
        self.refocus_prompt()
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

    def copy_to_clipboard(self, text: str) -> None:
        """Every copy (an answer, a code block, a mouse selection) leaves terminal controls out:
        pasted into a shell, an answer's `ESC[201~` would end bracketed paste and run the rest."""
        super().copy_to_clipboard(without_controls(text))

    def action_edit_prompt(self) -> None:
        """Open the prompt box's text in $VISUAL / $EDITOR (ocat.editor); what is saved comes back
        in the box, to send with Enter. A failed editor leaves the box as it was, and says why."""
        from ocat.editor import edit_text
        from ocat.ui.external_editor import in_editor

        box = self.query_one(PromptInput)
        edited, problem = in_editor(self, lambda: edit_text(box.text))
        if edited is None:
            self._notice(problem, error=True)
        else:
            box.text = edited
            box.move_cursor(box.document.end)
        box.focus()

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
        self.notify(f"Copied a code block ({count_of(len(code.splitlines()), 'line')}).")

    def on_assistant_message_code_clicked(self, message: AssistantMessage.CodeClicked) -> None:
        self.copy_to_clipboard(message.code)
        self.notify(f"Copied a code block ({count_of(len(message.code.splitlines()), 'line')}).")
