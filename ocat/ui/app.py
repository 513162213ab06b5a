"""The full-screen chat: paint first, load memory in a worker, stream answers as Markdown.

The app owns its components and hands each what it uses: memory (ocat.ui.memory_view, opened
in a thread that reports with messages), the slash commands (ocat.ui.command_view), the model's
check (ocat.ui.model_check), the conversation pane (ocat.ui.conversation), the themes
(ocat.ui.themes) and the prompt's focus (ocat.ui.prompt_focus); none of them mixes into the app
(docs/ARCHITECTURE.md). A chat turn is the app's own async worker that can be cancelled (Esc),
keeps what arrived, and stores nothing for a cancelled or failed turn. Every worker and
command ends in one place that shows what failed and logs the traceback.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import TYPE_CHECKING, Sequence
from textual.worker import Worker, WorkerCancelled, WorkerFailed, WorkerState

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from ocat.logs import failure_text
from ocat.chat.outcomes import TextPiece, ToolFinished, ToolStarted
from ocat.chat.session import ChatSession
from ocat.text.terminal import count_of, printable, without_controls
from ocat.ui.keys import default_keys, keymap
from ocat.ui.command_view import CommandView
from ocat.ui.conversation import Conversation
from ocat.ui.footer import ChatFooter
from ocat.ui.memory_view import MemoryState, MemoryStatus, MemoryView
from ocat.ui.message_focus import ForkHere
from ocat.ui.model_check import ModelCheck
from ocat.ui.palette import SlashCommands
from ocat.ui.prompt_focus import PromptFocus
from ocat.ui.status import answering_line, usage_line
from ocat.ui.themes import Themes
from ocat.ui.widgets import CommandSuggestions, PromptInput, UserMessage, memory_indicator, wake_indicator, plain
from ocat.ui import quick_exit
from ocat.ui.tool_calls import ToolCallView

if TYPE_CHECKING:
    from rich.console import RenderableType
    from textual import events

    from ocat.chat.turn import Turn
    from ocat.ui.answer import AssistantMessage  # loaded with the first answer, after the first frame
    from ocat.ui.memory_browser import MemoryBrowser

# The app's actions that belong to the chat screen alone.
_CHAT_ONLY_ACTIONS = frozenset({"copy_last", "copy_code", "edit_prompt", "memory"})


class OcatApp(App[int]):
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

    def __init__(
        self, session: ChatSession, *, serve: bool = True, quick_exit: bool = False, notes: Sequence[str] = ()
    ) -> None:
        """`quick_exit` (the real chat, not tests): closing never waits for workers (ocat.ui.quick_exit).
        `notes`: what the command line has to say, shown first in the conversation, after what the
        config has to say (an old key name used: `Settings.deprecations`)."""
        super().__init__()
        self.notes = [*session.settings.deprecations, *notes]
        self.session = session
        self.quick_exit = quick_exit
        self.conversation = Conversation(self)
        self.themes = Themes(self)
        self.prompt_focus = PromptFocus(self)
        self.model_check = ModelCheck(session, conversation=self.conversation)
        self.memory_view = MemoryView(session, serve=serve, conversation=self.conversation)
        self.commands = CommandView(
            session, conversation=self.conversation, memory_view=self.memory_view, themes=self.themes,
            send=self._send_now)
        self.turn: Worker[None] | None = None
        # The chat turn that worker runs: once its answer is in, nothing of it is left to stop.
        self.answering: Turn | None = None
        # Sends the prompts held in the box while an answer or a command ran (see on_prompt_input_submitted).
        self._held_sender: Worker[None] | None = None
        self.last_answer = ""
        self.set_keymap(keymap(session.settings.keys))

    def compose(self) -> ComposeResult:
        # Paths and model names are text, never markup: a store called "[b]" must not break the header.
        yield Static(plain(self.memory_view.header_text(self.size.width - 2)), id="header")
        yield VerticalScroll(id="conversation")
        yield Static("", id="status")
        yield CommandSuggestions(id="suggestions")
        yield PromptInput(id="prompt")
        yield ChatFooter()
        yield self.memory_view  # the components show nothing themselves
        yield self.commands
        yield self.model_check

    def on_load(self) -> None:
        if self.quick_exit:
            quick_exit.install()

    def on_mount(self) -> None:
        self.themes.load(self.session.settings.display.theme)
        self.query_one(PromptInput).focus()
        for note in self.notes:
            self.conversation.notice(note)
        # Stay scrolled to the newest message while answers and tables grow.
        self.query_one("#conversation", VerticalScroll).anchor()

    def on_ready(self) -> None:
        # Ready comes once the first frame is on screen: only then start chromadb and the
        # model, whose imports would otherwise compete with the first paint for the GIL.
        if self.session.settings.vector_store.enabled:
            self.memory_view.load_in_background()
        # The MCP servers start in the background too; a call not allowed beforehand asks here
        # (the session was given `ocat.ui.consent.ask_in_window` when it was made).
        self.session.server_tools.start()
        if not self.session.dummy:
            self.model_check.check_model()
        self.load_commands()

    @work(thread=True, group="commands")
    def load_commands(self) -> None:
        """Import the slash commands after the first frame (a few dozen ms kept off it); a `/`
        typed sooner imports them itself."""
        import ocat.commands  # noqa: F401, PLC0415 - the point: import them in a worker, after the first frame

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
        self.conversation.notice(f"Queued «{preview}»: it sends {until}.")

    def _begin(self, text: str, replaces: str = "") -> None:
        """Run a command or start a turn; `replaces`: text is the edited prompt of that exchange
        (/edit last), which is taken back first (ocat.commands.editing), unless text is a command."""
        from ocat.commands import is_command, run_command, run_step  # noqa: PLC0415 - commands load after the first frame

        if replaces and not is_command(text):
            from ocat.commands.editing import replace_last  # noqa: PLC0415 - commands load after the first frame

            self.commands.run(
                "/edit", lambda: run_step("/edit last", lambda: replace_last(self.session, replaces, text))
            )
        elif is_command(text):
            self.commands.run(text.split(maxsplit=1)[0], lambda: run_command(self.session, text))
        else:
            self._send_now(text)

    def _send_now(self, prompt: str) -> None:
        """Start a turn for `prompt` (typed, held, or sent by a command once it has shown its result)."""
        self.turn = self.chat_turn(prompt)

    def _work_under_way(self) -> list[Worker[None]]:
        """The answer and the command under way, if any."""
        return [w for w in (self.turn, self.commands.worker) if w is not None and not w.is_finished]

    async def _send_held(self) -> None:
        """Send the held prompts in order, each once the work before it has ended."""
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
        from ocat.ui.answer import AssistantMessage  # noqa: PLC0415 - Markdown loads with the first answer

        asked = UserMessage(prompt)
        await self.conversation.append(asked)
        status = self.query_one("#status", Static)
        started = time.monotonic()
        ticker = self.set_interval(0.1, lambda: status.update(answering_line(time.monotonic() - started)))
        answer = AssistantMessage()
        turn = self.answering = self.session.turn(prompt)
        shown: list[ToolCallView] = []  # each tool call's line, in order
        try:
            memories = await asyncio.to_thread(turn.recall)
            if turn.memory_lost:
                self.conversation.notice(f"Memory is off: {turn.memory_lost}", error=True)
                self.memory_view.show(MemoryStatus(MemoryState.OFF))
            elif turn.problem:  # this turn's search failed; memory stays on
                self.conversation.notice(f"Note: {turn.problem}.", error=True)
            context_mode = self.session.settings.display.context_mode
            if turn.wake_is_new and turn.wake is not None and context_mode == "on":
                await self.conversation.append(wake_indicator(turn.wake))
            indicator = memory_indicator(memories, context_mode)
            if indicator is not None:
                await self.conversation.append(indicator)
            await self.conversation.append(answer)
            stream = AssistantMessage.get_stream(answer)
            await asyncio.to_thread(turn.prepare)
            try:
                async for event in turn:
                    match event:
                        case TextPiece(text):
                            await stream.write(printable(text))  # the stored answer stays as it came
                        case ToolStarted(call):  # its line goes under the answer, and is updated when it ends
                            shown.append(ToolCallView(call, expanded=context_mode == "on"))
                            await self.conversation.append(shown[-1])
                        case ToolFinished(call):
                            next(view for view in shown if view.call is call).refresh_call()
            finally:
                await stream.stop()
            for note in turn.tool_notes:
                self.conversation.notice(f"Note: {note}.")
        except asyncio.CancelledError:
            if turn.complete:
                # The whole answer had come (the window is closing, or Esc came a moment late): it
                # is remembered as any other, in a thread of its own that closing does not stop.
                threading.Thread(target=turn.finish, name="ocat-record", daemon=True).start()
                raise
            turn.cancel()
            for view in shown:
                view.refresh_call()  # a call under way says it was cancelled
            self.conversation.notice("Cancelled: the partial answer stays on screen and is not remembered.")
            raise
        except Exception as exc:  # every failure of a turn is shown, and the prompt comes back
            if not turn.pieces:
                await answer.remove()
            self.conversation.notice(failure_text("the answer", exc), error=True)
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
        if turn.answered is not None:  # from now on a key on either message forks there
            asked.exchange_id = answer.exchange_id = turn.answered.exchange_id
        self.memory_view.say_what_was_remembered(turn)
        await self.memory_view.refresh_count()

    # -- actions -------------------------------------------------------------------

    def _stop_running_work(self) -> bool:
        """Cancel the answer being written, or ask a long command to stop; False if neither runs.

        An answer that has come in full is not running work: its exchange is being written to
        memory, which goes on whatever comes (Turn.cancel), so Ctrl+C goes on to copy or quit, as
        the user who saw the answer end means it to, and Esc leaves the turn to finish (before,
        either cancelled the window's own last steps: no "remembered" line, no fork key)."""
        if self.turn is not None and self.turn.state == WorkerState.RUNNING:
            if self.answering is not None and self.answering.complete:
                return False
            self.turn.cancel()
            return True
        command = self.commands.worker
        if command is not None and command.state == WorkerState.RUNNING:
            self.session.progress.stop()  # the command stops at its next step, keeping what it stored
            return True
        return False

    def action_cancel(self) -> None:
        """Stop the answer being written, or a long command; and bring focus back to the prompt
        if a click took it elsewhere."""
        self.prompt_focus.refocus()
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
        """Open the prompt box's text in $VISUAL / $EDITOR (PromptInput.edit_in_editor); a failed
        editor leaves the box as it was, and says why."""
        problem = self.query_one(PromptInput).edit_in_editor()
        if problem:
            self.conversation.notice(problem, error=True)

    def action_copy_last(self) -> None:
        """Copy the last answer as plain Markdown text."""
        if self.last_answer:
            self.copy_to_clipboard(self.last_answer)
            self.notify("Copied the last answer.")

    def action_copy_code(self) -> None:
        """Copy the last code block of the last answer."""
        from ocat.ui.answer import last_code_block  # noqa: PLC0415 - Markdown loads with the first answer

        code = last_code_block(self.last_answer)
        if code is None:
            self.notify("The last answer has no code block.", severity="warning")
            return
        self.copy_to_clipboard(code)
        self.notify(f"Copied a code block ({count_of(len(code.splitlines()), 'line')}).")

    def on_assistant_message_code_clicked(self, message: AssistantMessage.CodeClicked) -> None:
        self.copy_to_clipboard(message.code)
        self.notify(f"Copied a code block ({count_of(len(message.code.splitlines()), 'line')}).")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The chat's own keys (copy the answer, the editor, the browser) do nothing over another
        screen (the memory browser, a dialog): hidden there, so its footer shows its own keys."""
        if action in _CHAT_ONLY_ACTIONS and len(self.screen_stack) > 1:
            return False
        return True

    def action_memory(self) -> None:
        """Open the memory browser (`keys.memory`)."""
        self.commands.open_memory_browser("")

    async def on_memory_browser_threads_deleted(self, message: MemoryBrowser.ThreadsDeleted) -> None:
        """The thread on screen was deleted in the browser: start a new one, as /deletethread does."""
        if self.session.thread_id not in message.threads:
            return
        self.session.new_thread()
        await self.conversation.redraw(self.session.history)
        self.conversation.notice("The thread on screen was deleted from memory; a new thread starts.")

    def on_fork_here(self, message: ForkHere) -> None:
        """`keys.fork` on a focused message: fork there, as /fork does (CommandView.fork_at)."""
        self.commands.fork_at(message.exchange_id, busy=bool(self._work_under_way()))

    def on_resize(self, event: events.Resize) -> None:
        # The header is fitted to the width, not wrapped: refit it whenever the window changes.
        # (This runs before App's own handler has recorded the new size: the event has it.)
        self.memory_view.refresh_header(event.size.width - 2)

    # -- the prompt keeps focus (ocat.ui.prompt_focus) ------------------------------

    def on_key(self, event: events.Key) -> None:
        self.prompt_focus.take_key(event)

    def action_scroll_conversation(self, direction: str) -> None:
        """Scroll the conversation a page `up` or `down` (PageUp, PageDown in the prompt)."""
        self.prompt_focus.scroll(direction)

    # -- leaving ---------------------------------------------------------------------

    def exit(self, result: int | None = None, return_code: int = 0, message: RenderableType | None = None) -> None:
        """Close the window, giving the store up meanwhile (MemoryView.give_up_store)."""
        self.memory_view.give_up_store()
        super().exit(result, return_code, message)
